// Random delay: one request at a time, 100 ms apart plus up to 300 ms of jitter,
// so the crawl does not hit the server at a fixed rhythm.
//
//	go run ./_examples/random_delay [URL]
package main

import (
	"fmt"
	"log"
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
		start = srv.URL + "/page/"
	}

	c := magpie.NewCollector(
		// Each request's steps are logged to stderr, as in Colly's example.
		magpie.Debugger(&debug.LogDebugger{}),
		magpie.Async(true))
	if err := c.Limit(&magpie.LimitRule{
		DomainGlob:  "*",
		Parallelism: 1,
		Delay:       100 * time.Millisecond,
		RandomDelay: 300 * time.Millisecond,
	}); err != nil {
		log.Fatal(err)
	}

	last := time.Now()
	c.OnRequest(func(r *magpie.Request) {
		now := time.Now()
		fmt.Printf("+%4dms %s\n", now.Sub(last).Milliseconds(), r.URL)
		last = now
	})

	for i := 1; i <= 8; i++ {
		if err := c.Visit(fmt.Sprintf("%s%d", start, i)); err != nil {
			log.Fatal(err)
		}
	}
	c.Wait()
}
