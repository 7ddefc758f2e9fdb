// Basic: visit a page, print every link on it, and follow the links on the same host.
//
//	go run ./_examples/basic [URL]
//
// Without a URL it crawls a small site it serves itself on 127.0.0.1.
package main

import (
	"fmt"
	"log"
	"net/url"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
)

func main() {
	start := ""
	if len(os.Args) > 1 {
		start = os.Args[1]
	} else {
		srv := site.Start()
		defer srv.Close()
		start = srv.URL + "/"
	}
	u, err := url.Parse(start)
	if err != nil {
		log.Fatal(err)
	}

	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()))

	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		link := e.Attr("href")
		fmt.Printf("link found: %q -> %s\n", e.Text, link)
		// Visit returns at once inside a callback; refusals reach OnRefused.
		_ = e.Request.Visit(link)
	})
	c.OnRequest(func(r *magpie.Request) {
		fmt.Println("visiting", r.URL)
	})

	// A synchronous Visit returns when the crawl it started is done.
	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
}
