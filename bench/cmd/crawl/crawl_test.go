package main

import (
	"context"
	"fmt"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTestSite serves pages "/" and "/p/1".."/p/(n-1)"; each links to the next,
// to "/" (a duplicate), absolutely to itself, and to an external host.
func newTestSite(t *testing.T, n int) (*httptest.Server, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		i := 0
		if r.URL.Path != "/" {
			if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &i); err != nil || i <= 0 || i >= n {
				http.NotFound(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><a href="/">home</a><a href="http://%s%s">self</a>`, r.Host, r.URL.Path)
		if i+1 < n {
			fmt.Fprintf(w, `<p><a class="x" href="../p/%d">next</a></p>`, i+1)
		}
		fmt.Fprint(w, `<a href="http://external.invalid/">out</a><a href="/p/missing">broken</a></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(hits))
		for k, v := range hits {
			out[k] = v
		}
		return out
	}
}

func TestCrawlEveryPageOnce(t *testing.T) {
	const pages = 40
	for _, impl := range harness.Names(impls) {
		for _, p := range []int{1, 8} {
			t.Run(fmt.Sprintf("%s/p=%d", impl, p), func(t *testing.T) {
				srv, hits := newTestSite(t, pages)
				cfg, err := harness.NewConfig(srv.URL+"/", p, 0, 0, "")
				if err != nil {
					t.Fatalf("newConfig: %v", err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				var n harness.Counters
				if err := impls[impl](ctx, cfg, &n); err != nil {
					t.Fatalf("%s crawl error = %v, want nil", impl, err)
				}
				if got := n.Pages.Load(); got != pages {
					t.Errorf("%s pages = %d, want %d", impl, got, pages)
				}
				if got := n.Errors.Load(); got != 1 {
					t.Errorf("%s errors = %d, want 1 (/p/missing)", impl, got)
				}
				for path, c := range hits() {
					if c != 1 && !strings.HasPrefix(impl, "colly") {
						// Colly's visited check is not atomic; duplicates
						// are what the benchmark measures, not a test failure.
						t.Errorf("%s fetched %s %d times, want 1", impl, path, c)
					}
				}
			})
		}
	}
}
