// Rate limit: two requests in flight to the host, and at least 200 ms between two starts.
//
//	go run ./_examples/rate_limit [URL]
package main

import (
	"fmt"
	"log"
	"net/url"
	"os"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
	"github.com/magpiecrawl/magpie/debug"
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

	c := magpie.NewCollector(
		// Each request's steps are logged to stderr, as in Colly's example.
		magpie.Debugger(&debug.LogDebugger{}),
		magpie.Async(true), magpie.MaxDepth(6), magpie.AllowedDomains(hostOf(start)))
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

// hostOf is the hostname of u: the crawl stays on the site it starts on.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		log.Fatal(err)
	}
	return p.Hostname()
}
