// Max depth: follow links, but no deeper than two pages from the start.
//
//	go run ./_examples/max_depth [URL]
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
		start = srv.URL + "/page/1"
	}

	// c.Visit is depth 1, the pages it links to depth 2, and so on.
	c := magpie.NewCollector(magpie.MaxDepth(2), magpie.AllowedDomains(hostOf(start)))

	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(r *magpie.Response) {
		fmt.Printf("depth %d: %s\n", r.Request.Depth, r.Request.URL)
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
}

// hostOf is the hostname of u: the crawl stays on the site it starts on.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		log.Fatal(err)
	}
	return p.Hostname()
}
