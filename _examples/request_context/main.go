// Request context: carry values from a request to its response callbacks,
// and on to the requests those callbacks make.
//
//	go run ./_examples/request_context [URL]
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

	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()), magpie.MaxDepth(2))

	// Before each request, remember in its context when and from where it was made.
	c.OnRequest(func(r *magpie.Request) {
		r.Ctx.Put("url", r.URL.String())
		if r.Ctx.Get("parent") == "" {
			r.Ctx.Put("parent", "(start)")
		}
	})
	// The response sees the same context as its request.
	c.OnResponse(func(r *magpie.Response) {
		fmt.Printf("got %s, requested as %s, found on %s\n", r.Request.URL.Path, r.Ctx.Get("url"), r.Ctx.Get("parent"))
	})
	// A child request gets its own copy of the context: set "parent" in the copy.
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		ctx := e.Request.Ctx.Clone()
		ctx.Put("parent", e.Request.URL.Path)
		link := e.Request.AbsoluteURL(e.Attr("href"))
		_ = c.Request("GET", link, nil, ctx, nil)
	})

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
}
