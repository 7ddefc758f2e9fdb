package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/bench/internal/harness"
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
		// The storage scenario's crawls stop at a frontier size or run
		// worker processes; TestFrontier covers the first kind.
		if strings.HasPrefix(impl, "magpie-frontier-") || strings.HasPrefix(impl, "magpie-redis") {
			continue
		}
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
					if c != 1 {
						t.Errorf("%s fetched %s %d times, want 1", impl, path, c)
					}
				}
			})
		}
	}
}

// newHubSite serves "/" linking to hubs "/h/0".."/h/(hubs-1)", each linking
// to leaves distinct leaf pages, which link nowhere and take leafDelay: the
// hubs are leased first, so with a delay the whole frontier is queued long
// before the leaves are fetched.
func newHubSite(t *testing.T, hubs, leaves int, leafDelay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var h, l int
		w.Header().Set("Content-Type", "text/html")
		switch {
		case r.URL.Path == "/":
			for i := range hubs {
				fmt.Fprintf(w, `<a href="/h/%d">hub</a>`, i)
			}
		case fmtScan(r.URL.Path, "/h/%d", &h):
			for i := range leaves {
				fmt.Fprintf(w, `<a href="/l/%d">leaf</a>`, h*leaves+i)
			}
		case fmtScan(r.URL.Path, "/l/%d", &l):
			select {
			case <-time.After(leafDelay):
			case <-r.Context().Done():
			}
			fmt.Fprint(w, "<p>leaf</p>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func fmtScan(s, format string, v *int) bool {
	_, err := fmt.Sscanf(s, format, v)
	return err == nil
}

func TestFrontier(t *testing.T) {
	defer func(old int, poll time.Duration) { *frontierTarget, frontierPoll = old, poll }(*frontierTarget, frontierPoll)
	frontierPoll = time.Millisecond
	tests := []struct {
		impl      string
		target    int
		leafDelay time.Duration
		wantErr   bool
	}{
		{"magpie-frontier-sqlite", 150, 100 * time.Millisecond, false},
		{"magpie-frontier-mem", 150, 100 * time.Millisecond, false},
		// More than the site has: the crawl ends first, which is an error.
		{"magpie-frontier-mem", 201, 0, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.impl, tt.target), func(t *testing.T) {
			*frontierTarget = tt.target
			srv := newHubSite(t, 40, 5, tt.leafDelay)
			cfg, err := harness.NewConfig(srv.URL+"/", 2, 0, 0, "")
			if err != nil {
				t.Fatalf("NewConfig: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			var n harness.Counters
			err = impls[tt.impl](ctx, cfg, &n)
			if (err != nil) != tt.wantErr {
				t.Fatalf("%s crawl error = %v, want error %v", tt.impl, err, tt.wantErr)
			}
			if got := n.Frontier.Load(); !tt.wantErr && got < int64(tt.target) {
				t.Errorf("%s frontier = %d, want >= %d", tt.impl, got, tt.target)
			}
		})
	}
}
