// Stream HTML: crawl a site with StreamHTML, which matches the OnHTML
// selectors while each page is tokenized and builds only the elements they
// match, then print how many pages were streamed and how many the parser
// had to build whole.
//
//	go run ./_examples/stream_html [URL]
//
// Without a URL it crawls a small site it serves itself on 127.0.0.1.
package main

import (
	"fmt"
	"log"
	"net/url"
	"os"
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

	// Both selectors name a tag and its attributes only, so pages can be
	// streamed. A selector such as "div a" would need the whole document.
	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()), magpie.Async(), magpie.StreamHTML())
	var mu sync.Mutex
	titles := map[string]string{}
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		mu.Lock()
		titles[e.Request.URL.String()] = e.Text
		mu.Unlock()
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	c.Wait()
	for page, title := range titles {
		fmt.Printf("%s: %s\n", page, title)
	}
	st := c.Stats()
	fmt.Printf("%d pages streamed, %d parsed whole\n", st.HTMLStreamed, st.HTMLParsedWhole)
}
