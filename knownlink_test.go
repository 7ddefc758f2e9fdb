package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// TestVisitedLinkRefusal: a link to a page already visited is refused the
// same way whether the Request is built (an OnRefused callback listens) or
// not (knownLink): Visit returns *AlreadyVisitedError naming the absolute
// URL, Stats counts it, and the crawl fetches each page once.
func TestVisitedLinkRefusal(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/p/{n}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		// Every page links to all three, absolute and relative.
		fmt.Fprint(w, `<a href="/p/1">1</a><a href="/p/2">2</a><a href="http://`+r.Host+`/p/3">3</a><a href="/p/1?x=1">q</a>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, listen := range []bool{false, true} {
		t.Run(fmt.Sprintf("OnRefused=%v", listen), func(t *testing.T) {
			c := NewCollector(Async(true))
			var mu sync.Mutex
			var visited, refusedCB []string
			var errs []error
			c.OnHTML("a[href]", func(e *HTMLElement) {
				err := e.Request.Visit(e.Attr("href"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
			})
			c.OnResponse(func(r *Response) {
				mu.Lock()
				visited = append(visited, r.Request.URL.Path)
				mu.Unlock()
			})
			if listen {
				c.OnRefused(func(r *Request, err error) {
					mu.Lock()
					refusedCB = append(refusedCB, r.URL.String())
					mu.Unlock()
				})
			}
			if err := c.Visit(srv.URL + "/p/1"); err != nil {
				t.Fatalf("Visit: %v", err)
			}
			c.Wait()
			// 4 pages (/p/1, /p/2, /p/3, /p/1?x=1) of 4 links: 16 links,
			// 3 of them admitted (the seed was admitted by c.Visit).
			if len(visited) != 4 {
				t.Errorf("fetched %v, want 4 pages once each", visited)
			}
			if len(errs) != 13 {
				t.Fatalf("Visit errors: %d (%v), want 13", len(errs), errs)
			}
			for _, err := range errs {
				var av *AlreadyVisitedError
				if !errors.As(err, &av) || av.Destination == nil {
					t.Fatalf("Visit error %v, want *AlreadyVisitedError with a Destination", err)
				}
				if !slices.Contains([]string{"/p/1", "/p/2", "/p/3"}, av.Destination.Path) || av.Destination.Host != srv.Listener.Addr().String() {
					t.Errorf("Destination = %v, want an absolute URL of the site", av.Destination)
				}
			}
			if n := c.Stats().Refused[RefusedVisited]; n != 13 {
				t.Errorf("Stats().Refused[visited] = %d, want 13", n)
			}
			if listen && len(refusedCB) != 13 {
				t.Errorf("OnRefused called %d times, want 13", len(refusedCB))
			}
		})
	}
}

// TestVisitedLinkAllocations: refusing a link to a visited page builds no
// Request (the slow way costs a dozen allocations or more).
func TestVisitedLinkAllocations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/">home</a>`)
	}))
	t.Cleanup(srv.Close)
	c := NewCollector()
	var allocs float64
	var err error
	c.OnHTML("a[href]", func(e *HTMLElement) {
		allocs = testing.AllocsPerRun(200, func() { err = e.Request.Visit("/") })
	})
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit: %v", err)
	}
	if _, ok := errors.AsType[*AlreadyVisitedError](err); !ok {
		t.Fatalf("Visit of the page itself: %v, want *AlreadyVisitedError", err)
	}
	if allocsCounted(t) && allocs > 1 {
		t.Errorf("refusing a visited link: %v allocations, want at most 1", allocs)
	}
}
