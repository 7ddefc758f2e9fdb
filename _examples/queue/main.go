// Queue: two consumer threads work through a queue of URLs; links found by
// callbacks go into the same queue.
//
//	go run ./_examples/queue [URL]
package main

import (
	"fmt"
	"log"
	"net/url"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
	"github.com/magpiecrawl/magpie/queue"
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

	q, err := queue.New(2, &queue.InMemoryQueueStorage{MaxSize: 10000})
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if err := q.AddURL(fmt.Sprintf("%s%d", start, i)); err != nil {
			log.Fatal(err)
		}
	}

	c := magpie.NewCollector(magpie.MaxDepth(3), magpie.AllowedDomains(hostOf(start)))
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href")) // pushed to q while it runs
	})
	c.OnResponse(func(r *magpie.Response) {
		fmt.Printf("depth %d %s\n", r.Request.Depth, r.Request.URL)
	})

	// Run returns when the queue is empty and nothing is in flight.
	if err := q.Run(c); err != nil {
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
