// Error handling: every failure, including requests refused before any fetch,
// reaches OnError with the request it belongs to.
//
//	go run ./_examples/error_handling [URL...]
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
)

func main() {
	urls := os.Args[1:]
	if len(urls) == 0 {
		srv := site.Start()
		defer srv.Close()
		urls = []string{
			srv.URL + "/page/1",        // fine
			srv.URL + "/missing",       // 404
			srv.URL + "/fail",          // 500
			srv.URL + "/private/stats", // disallowed by robots.txt
			srv.URL + "/page/1",        // already visited
			"ftp://example.com/",       // not http
		}
	}

	c := magpie.NewCollector()

	c.OnResponse(func(r *magpie.Response) {
		fmt.Printf("ok     %d %s\n", r.StatusCode, r.Request.URL)
	})
	// OnError: requests that were sent and failed.
	c.OnError(func(r *magpie.Response, err error) {
		var httpErr *magpie.HTTPError
		if errors.As(err, &httpErr) {
			fmt.Printf("error  HTTP %d for %s\n", httpErr.StatusCode, r.Request.URL)
			return
		}
		fmt.Printf("error  %s: %v\n", r.Request.URL, err)
	})
	// OnRefused: requests refused before they were sent.
	c.OnRefused(func(r *magpie.Request, err error) {
		var visited *magpie.AlreadyVisitedError
		switch {
		case errors.Is(err, magpie.ErrRobotsTxtBlocked):
			fmt.Printf("refused robots.txt forbids %s\n", r.URL)
		case errors.As(err, &visited):
			fmt.Printf("refused %s was already visited\n", visited.Destination)
		default:
			fmt.Printf("refused %v\n", err)
		}
	})

	for _, u := range urls {
		// The same error is returned here and delivered to OnError or OnRefused.
		_ = c.Visit(u)
	}
}
