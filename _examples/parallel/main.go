// Parallel: crawl asynchronously with at most four requests in flight per host.
//
//	go run ./_examples/parallel [URL]
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
	u, err := url.Parse(start)
	if err != nil {
		log.Fatal(err)
	}

	c := magpie.NewCollector(
		magpie.Async(true),
		magpie.AllowedDomains(u.Hostname()),
		magpie.MaxDepth(10),
	)
	// Parallelism is per host: every matching host gets four slots.
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 4}); err != nil {
		log.Fatal(err)
	}

	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnScraped(func(r *magpie.Response) {
		fmt.Println("scraped", r.Request.URL)
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	// Async Visit returns at once; Wait returns when the crawl is idle.
	c.Wait()
	fmt.Println(c)
}
