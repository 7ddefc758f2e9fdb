// Quickstart: crawl a site, print each page's title, then the counts.
//
//	go run ./_examples/quickstart https://example.com/
//
// In a module of your own: go get github.com/magpiecrawl/magpie@latest, paste
// this file as main.go, and go run . https://example.com/
package main

import (
	"fmt"
	"log"
	"net/url"
	"os"

	"github.com/magpiecrawl/magpie"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: quickstart URL")
	}
	start, err := url.Parse(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}

	c := magpie.NewCollector(
		magpie.AllowedDomains(start.Hostname()), // stay on the site
		magpie.MaxDepth(2),                      // the start page and the pages it links to
	)
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		// A link refused (visited already, another site, too deep) goes to
		// OnRefused, not here: Visit returns at once inside a callback.
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		fmt.Println(e.Request.URL, e.Text)
	})
	c.OnError(func(r *magpie.Response, err error) {
		log.Println("error:", r.Request.URL, err)
	})

	// A synchronous Visit returns when the crawl it started is done.
	if err := c.Visit(start.String()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(c)
}
