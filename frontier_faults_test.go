package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// An async in-memory crawl whose hub page yields more links than MaxPending
// allows: the links past the bound are refused with ErrFrontierFull (the
// Visit error, OnRefused and Stats), are not marked visited, and the crawl
// finishes the rest. (Without a bound the in-memory frontier grew with
// every link: 855 bytes each, 8.5 GiB for ten million.)
func TestMaxPendingRefusesPastTheBound(t *testing.T) {
	const links, bound = 200, 50
	release := make(chan struct{})
	var mu sync.Mutex
	hits := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			var b strings.Builder
			for i := range links {
				fmt.Fprintf(&b, `<a href="/l/%d">l</a>`, i)
			}
			fmt.Fprint(w, b.String())
			return
		}
		// Leaves hold their place in the frontier until the hub's links
		// are all visited, so the count at the bound is exact.
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "leaf")
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(Async(), IgnoreRobotsTxt(), MaxPending(bound))
	var visitErrs, refusedFull int
	var refusedURLs []string
	c.OnHTML("a[href]", func(e *HTMLElement) {
		if err := e.Request.Visit(e.Attr("href")); errors.Is(err, ErrFrontierFull) {
			mu.Lock()
			visitErrs++
			mu.Unlock()
		}
	})
	c.OnScraped(func(r *Response) {
		if r.Request.URL.Path == "/" {
			close(release)
		}
	})
	c.OnRefused(func(r *Request, err error) {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, ErrFrontierFull) {
			refusedFull++
			refusedURLs = append(refusedURLs, r.URL.String())
		}
	})
	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatalf("Visit error = %v", err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Wait did not return within 60s")
	}
	mu.Lock()
	defer mu.Unlock()
	// The hub holds one place while its callbacks run.
	wantFetched, wantRefused := bound-1, links-(bound-1)
	if got := len(hits) - 1; got != wantFetched {
		t.Errorf("leaves fetched = %d, want %d", got, wantFetched)
	}
	if refusedFull != wantRefused || visitErrs != wantRefused {
		t.Errorf("refused with ErrFrontierFull: OnRefused %d, Visit errors %d, want %d", refusedFull, visitErrs, wantRefused)
	}
	if got := c.Stats().Refused[RefusedFrontierFull]; got != uint64(wantRefused) {
		t.Errorf("Stats().Refused[%q] = %d, want %d", RefusedFrontierFull, got, wantRefused)
	}
	for _, u := range refusedURLs[:min(3, len(refusedURLs))] {
		if seen, err := c.HasVisited(u); err != nil || seen {
			t.Errorf("HasVisited(%q) = %v, %v after ErrFrontierFull, want false", u, seen, err)
		}
	}
}

func TestPendingBound(t *testing.T) {
	for _, tt := range []struct{ n, want int }{{0, DefaultMaxPending}, {-1, 0}, {7, 7}} {
		if got := pendingBound(tt.n); got != tt.want {
			t.Errorf("pendingBound(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
