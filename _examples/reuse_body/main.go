// Reuse body: crawl a site with ReuseBody, which reads every page into
// memory the collector reuses once the page's callbacks have returned. The
// callbacks read the body while they run (a checksum of each page) and copy
// what they keep (the largest page's body).
//
//	go run ./_examples/reuse_body [URL]
//
// Without a URL it crawls a small site it serves itself on 127.0.0.1.
package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"log"
	"net/url"
	"os"
	"sort"
	"sync"

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

	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()), magpie.Async(), magpie.StreamHTML(), magpie.ReuseBody())
	var mu sync.Mutex
	sums := map[string]string{}
	var largest []byte
	c.OnResponse(func(r *magpie.Response) {
		// r.Body is valid until this page's callbacks have returned: the
		// checksum is computed now, and the body kept is a copy.
		sum := fmt.Sprintf("%x", sha256.Sum256(r.Body))
		mu.Lock()
		defer mu.Unlock()
		sums[r.Request.URL.String()] = sum[:16]
		if len(r.Body) > len(largest) {
			largest = bytes.Clone(r.Body)
		}
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	c.Wait()
	pages := make([]string, 0, len(sums))
	for p := range sums {
		pages = append(pages, p)
	}
	sort.Strings(pages)
	for _, p := range pages {
		fmt.Printf("%s  %s\n", sums[p], p)
	}
	fmt.Printf("%d pages; the largest, %d bytes, kept as a copy\n", len(sums), len(largest))
}
