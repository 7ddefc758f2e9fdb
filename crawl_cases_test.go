package magpie

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// spy records what a crawl's callbacks saw: how many times each ran (keys
// "OnRequest", "OnResponse", "OnError", "OnScraped" and "OnRefused/<reason>",
// the reason as in Stats().Refused), the request URIs OnResponse got, the
// texts of the elements its OnHTML selector matched, the errors OnError got,
// and the last response OnResponse and OnError got.
type spy struct {
	mu     sync.Mutex
	counts map[string]int
	paths  []string
	texts  []string
	errs   []error
	last   *Response
	// lastErr is the last response OnError got.
	lastErr *Response
}

// newSpy registers the spy's callbacks on c; with htmlSel set it records
// the text of every element that selector matches.
func newSpy(c *Collector, htmlSel string) *spy {
	s := &spy{counts: map[string]int{}}
	note := func(key string, f func()) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.counts[key]++
		if f != nil {
			f()
		}
	}
	c.OnRequest(func(*Request) { note("OnRequest", nil) })
	c.OnResponse(func(r *Response) {
		note("OnResponse", func() { s.paths, s.last = append(s.paths, r.Request.URL.RequestURI()), r })
	})
	c.OnError(func(r *Response, err error) {
		note("OnError", func() { s.errs, s.lastErr = append(s.errs, err), r })
	})
	c.OnScraped(func(*Response) { note("OnScraped", nil) })
	c.OnRefused(func(_ *Request, err error) { note("OnRefused/"+refusalReason(err), nil) })
	if htmlSel != "" {
		c.OnHTML(htmlSel, func(e *HTMLElement) { note("", func() { s.texts = append(s.texts, e.Text) }) })
	}
	return s
}

// snapshot returns the counts (without the OnHTML key) and the sorted paths.
func (s *spy) snapshot() (map[string]int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := maps.Clone(s.counts)
	delete(counts, "")
	return counts, slices.Sorted(slices.Values(s.paths))
}

// visitStep is one top-level Visit of a crawl case and what it must return.
type visitStep struct {
	path string
	// want checks Visit's error; it returns what was wanted, or "" when err
	// is right.
	want func(err error) string
}

func wantNil(err error) string {
	if err != nil {
		return "nil"
	}
	return ""
}

func wantIs(target error) func(error) string {
	return func(err error) string {
		if !errors.Is(err, target) {
			return target.Error()
		}
		return ""
	}
}

func wantStatus(code int) func(error) string {
	return func(err error) string {
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != code {
			return fmt.Sprintf("*HTTPError %d", code)
		}
		return ""
	}
}

func wantAlreadyVisited(err error) string {
	if !errors.As(err, new(*AlreadyVisitedError)) {
		return "*AlreadyVisitedError"
	}
	return ""
}

// wantFreshFailure wants a failure that is not a revisit refusal.
func wantFreshFailure(err error) string {
	if err == nil || errors.As(err, new(*AlreadyVisitedError)) {
		return "a fresh failure, not AlreadyVisited"
	}
	return ""
}

// TestCrawlCases runs end-to-end crawls of newTestServer's site, each
// described by its options, what its callbacks do, the Visits made and what
// the callbacks saw (the spy) and the server served.
func TestCrawlCases(t *testing.T) {
	all := []string{"/", "/a", "/b", "/c", "/leaf?from=a", "/leaf?from=b", "/leaf?from=c"}
	tests := []struct {
		name string
		opts []CollectorOption
		// follow makes OnHTML("a[href]") call e.Request.Visit;
		// followCollector makes it call the collector's c.Visit instead.
		follow, followCollector bool
		// htmlSel is the spy's OnHTML selector.
		htmlSel string
		// setup registers the case's own callbacks.
		setup  func(c *Collector)
		visits []visitStep
		// want are spy counts that must match exactly.
		want map[string]int
		// wantPaths, when set, are the request URIs OnResponse got, sorted.
		wantPaths []string
		// wantTexts, when set, are the texts htmlSel matched, in order.
		wantTexts []string
		// wantHits are the server's hits by path.
		wantHits map[string]int
		// check makes the case's other assertions.
		check func(t *testing.T, s *spy)
	}{
		{
			// Was TestVisitOnHTMLSync.
			name:      "OnHTML in a sync Visit",
			htmlSel:   "p.x",
			visits:    []visitStep{{"/html", wantNil}},
			wantTexts: []string{"one", "two"},
		},
		{
			// Was TestRecursiveCrawl/sync.
			name:      "recursive crawl, sync",
			opts:      []CollectorOption{Async(false), Workers(1)},
			follow:    true,
			visits:    []visitStep{{"/", wantNil}},
			wantPaths: all,
			want:      map[string]int{"OnResponse": 7, "OnScraped": 7, "OnRefused/visited": 3},
		},
		{
			// Was TestRecursiveCrawl/async.
			name:      "recursive crawl, async",
			opts:      []CollectorOption{Async(true), Workers(1)},
			follow:    true,
			visits:    []visitStep{{"/", wantNil}},
			wantPaths: all,
			want:      map[string]int{"OnResponse": 7, "OnScraped": 7, "OnRefused/visited": 3},
		},
		{
			// Was TestSyncVisitFromCallbackNoDeadlock: a collector-level
			// Visit from a callback never deadlocks, sync mode, one worker.
			name:            "c.Visit from a callback, one worker",
			opts:            []CollectorOption{Workers(1)},
			followCollector: true,
			visits:          []visitStep{{"/", wantNil}},
			want:            map[string]int{"OnResponse": 7},
		},
		{
			// Was TestVisitErrors.
			name: "Visit errors",
			visits: []visitStep{
				{"/404", wantStatus(404)},
				{"/html", wantNil},
				{"/html", wantAlreadyVisited},
			},
			want: map[string]int{"OnError": 1, "OnResponse": 1, "OnRefused/visited": 1},
		},
		{
			// Was TestFailedFetchCanBeRetriedLater.
			name:     "a failed fetch can be tried again",
			visits:   []visitStep{{"/500", wantFreshFailure}, {"/500", wantFreshFailure}},
			wantHits: map[string]int{"/500": 2},
		},
		{
			// Was TestTruncationFlagged.
			name:   "truncation is flagged",
			opts:   []CollectorOption{MaxBodySize(1000)},
			visits: []visitStep{{"/big", wantNil}},
			check: func(t *testing.T, s *spy) {
				if s.last == nil || !s.last.Truncated || len(s.last.Body) != 1000 {
					t.Fatalf("response Truncated/len = %v/%d, want true/1000", s.last != nil && s.last.Truncated, len(s.last.Body))
				}
			},
		},
		{
			// Colly: a redirect handler returning http.ErrUseLastResponse
			// gets the 3xx itself, which, not being 2xx, goes to OnError
			// with the response ("OnError /redirect 302 Found").
			name: "a redirect handler's ErrUseLastResponse gives the 3xx",
			setup: func(c *Collector) {
				c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })
			},
			visits:   []visitStep{{"/redirect", wantStatus(http.StatusFound)}},
			want:     map[string]int{"OnError": 1, "OnResponse": 0, "OnScraped": 0},
			wantHits: map[string]int{"/redirect": 1, "/html": 0},
			check: func(t *testing.T, s *spy) {
				r := s.lastErr
				if r == nil || r.StatusCode != http.StatusFound || r.Request.URL.Path != "/redirect" ||
					r.Headers == nil || r.Headers.Get("Location") != "/html" {
					t.Fatalf("OnError response = %+v, want 302 for /redirect with Location /html", r)
				}
			},
		},
		{
			// Was TestCallbackPanicRecovered.
			name:   "a callback's panic is recovered",
			setup:  func(c *Collector) { c.OnHTML("p", func(*HTMLElement) { panic("boom") }) },
			visits: []visitStep{{"/html", wantIs(ErrCallbackPanic)}},
			// Each of the page's two <p> panics, and OnScraped still runs.
			want: map[string]int{"OnRequest": 1, "OnResponse": 1, "OnError": 2, "OnScraped": 1},
			check: func(t *testing.T, s *spy) {
				for _, err := range s.errs {
					if !errors.Is(err, ErrCallbackPanic) {
						t.Errorf("OnError got %v, want ErrCallbackPanic", err)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t)
			c := NewCollector(tt.opts...)
			s := newSpy(c, tt.htmlSel)
			switch {
			case tt.follow:
				c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.DOM.AttrOr("href", "")) })
			case tt.followCollector:
				c.OnHTML("a[href]", func(e *HTMLElement) { _ = c.Visit(e.Request.AbsoluteURL(e.DOM.AttrOr("href", ""))) })
			}
			if tt.setup != nil {
				tt.setup(c)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for _, v := range tt.visits {
					err := c.Visit(ts.URL + v.path)
					if want := v.want(err); want != "" {
						t.Errorf("Visit(%q) error = %v, want %s", v.path, err, want)
					}
				}
				c.Wait()
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("crawl deadlocked")
			}
			counts, paths := s.snapshot()
			for k, n := range tt.want {
				if counts[k] != n {
					t.Errorf("spy[%q] = %d, want %d (all: %v)", k, counts[k], n, counts)
				}
			}
			if tt.wantPaths != nil && !slices.Equal(paths, tt.wantPaths) {
				t.Errorf("OnResponse paths = %q, want %q", paths, tt.wantPaths)
			}
			if tt.wantTexts != nil && !slices.Equal(s.texts, tt.wantTexts) {
				t.Errorf("OnHTML(%q) texts = %q, want %q", tt.htmlSel, s.texts, tt.wantTexts)
			}
			for p, n := range tt.wantHits {
				if got := ts.count(p); got != n {
					t.Errorf("%s fetched %d times, want %d", p, got, n)
				}
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}
