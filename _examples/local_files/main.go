// Local files: crawl HTML files on disk through file:// URLs, with the
// standard library's file transport registered on the HTTP transport.
//
//	go run ./_examples/local_files [DIR]
//
// Without a directory it writes a small site of four pages to a temporary
// directory and crawls that.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/magpiecrawl/magpie"
)

func main() {
	dir := ""
	if len(os.Args) > 1 {
		dir = os.Args[1]
	} else {
		tmp, err := os.MkdirTemp("", "magpie-local-files")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		writeSite(tmp)
		dir = tmp
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		log.Fatal(err)
	}

	t := &http.Transport{}
	t.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
	c := magpie.NewCollector()
	c.WithTransport(t)

	pages := []string{}
	c.OnHTML("h1", func(e *magpie.HTMLElement) {
		pages = append(pages, e.Text)
		fmt.Printf("%s: %s\n", filepath.Base(e.Request.URL.Path), e.Text)
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})

	if err := c.Visit("file://" + filepath.ToSlash(filepath.Join(abs, "index.html"))); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pages:", len(pages))
}

// writeSite writes index.html linking to three pages.
func writeSite(dir string) {
	files := map[string]string{
		"index.html":  `<h1>Index</h1><a href="apples.html">apples</a> <a href="pears.html">pears</a> <a href="plums.html">plums</a>`,
		"apples.html": `<h1>Apples</h1><a href="index.html">back</a>`,
		"pears.html":  `<h1>Pears</h1><a href="index.html">back</a>`,
		"plums.html":  `<h1>Plums</h1><a href="index.html">back</a>`,
	}
	for name, body := range files {
		page := "<!DOCTYPE html><html><body>" + body + "</body></html>"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
