// Rate limit: two requests in flight to the host, and at least 200 ms between two starts.
//
//	go run ./_examples/rate_limit [URL]
package main

import (
	"fmt"
	"log"
	"os"
	"time"

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

	c := magpie.NewCollector(magpie.Async(true), magpie.MaxDepth(6))
	// Matching is on the hostname, so "127.0.0.1" also matches 127.0.0.1:PORT.
	if err := c.Limit(&magpie.LimitRule{
		DomainGlob:  "*",
		Parallelism: 2,
		Delay:       200 * time.Millisecond,
	}); err != nil {
		log.Fatal(err)
	}

	began := time.Now()
	c.OnRequest(func(r *magpie.Request) {
		fmt.Printf("%6.3fs start %s\n", time.Since(began).Seconds(), r.URL.Path)
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	c.Wait()
}
