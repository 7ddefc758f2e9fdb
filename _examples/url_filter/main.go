// URL filter: crawl only the URLs that match regular expressions.
//
//	go run ./_examples/url_filter [URL]
package main

import (
	"fmt"
	"log"
	"os"
	"regexp"

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

	c := magpie.NewCollector(
		// Only the home page and pages 1 to 5 are admitted; every other
		// link (later pages, /missing, other sites) is refused before it is fetched.
		magpie.URLFilters(
			regexp.MustCompile(`^http://127\.0\.0\.1:\d+/$`),
			regexp.MustCompile(`^http://127\.0\.0\.1:\d+/page/[1-5]$`),
		),
	)
	if len(os.Args) > 1 {
		// On another site, the filters above would refuse everything: use your own.
		c = magpie.NewCollector()
	}

	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	pages := 0
	c.OnResponse(func(r *magpie.Response) {
		pages++
		fmt.Println("visited", r.Request.URL.Path)
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pages visited:", pages)
}
