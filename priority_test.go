package magpie

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// orderSite serves pages on one or more hosts (httptest servers on
// 127.0.0.1) and records the order their requests arrive in. It holds each
// request until the page requested before it has been scraped (done), so
// that the links of a page are queued before the crawl fetches more than
// the few requests it has taken ahead: with Workers(1) and MaxParked(1),
// the links of the k-th page fetched are fetched by the (k+4)-th fetch at
// the latest, in the order the frontier hands them out.
type orderSite struct {
	t     *testing.T
	hosts map[string]*httptest.Server
	// links are each page's links, as "host:path" (host a key of hosts).
	links map[string][]string

	// mu guards order and scraped.
	mu      sync.Mutex
	order   []string
	scraped map[string]chan struct{}
}

// newOrderSite starts a server for each host name; links maps a path to
// its page's links.
func newOrderSite(t *testing.T, links map[string][]string, hosts ...string) *orderSite {
	t.Helper()
	s := &orderSite{t: t, hosts: map[string]*httptest.Server{}, links: links, scraped: map[string]chan struct{}{}}
	for _, h := range hosts {
		srv := httptest.NewServer(http.HandlerFunc(s.serve))
		t.Cleanup(srv.Close)
		s.hosts[h] = srv
	}
	return s
}

// url is the absolute URL of "host:path".
func (s *orderSite) url(link string) string {
	h, p, _ := strings.Cut(link, ":")
	return s.hosts[h].URL + p
}

// doneCh is path's scraped channel; s.mu is held.
func (s *orderSite) doneCh(path string) chan struct{} {
	ch := s.scraped[path]
	if ch == nil {
		ch = make(chan struct{})
		s.scraped[path] = ch
	}
	return ch
}

// done reports that path's page has been scraped.
func (s *orderSite) done(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.doneCh(path)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (s *orderSite) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var prev chan struct{}
	if n := len(s.order); n > 0 {
		prev = s.doneCh(s.order[n-1])
	}
	s.order = append(s.order, r.URL.Path)
	s.mu.Unlock()
	if prev != nil {
		select {
		case <-prev:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/html")
	var b strings.Builder
	for _, l := range s.links[r.URL.Path] {
		fmt.Fprintf(&b, `<a href="%s">x</a>`, s.url(l))
	}
	fmt.Fprintf(w, "<html><body>%s</body></html>", b.String())
}

// fetched returns the paths in the order they were requested.
func (s *orderSite) fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// collector returns a collector that crawls s one request at a time,
// following links and reporting scraped pages to s.
func (s *orderSite) collector(async bool, opts ...CollectorOption) *Collector {
	opts = append([]CollectorOption{Async(async), Workers(1), MaxParked(1), IgnoreRobotsTxt()}, opts...)
	c := NewCollector(opts...)
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
		s.t.Fatalf("Limit() error = %v", err)
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnScraped(func(r *Response) { s.done(r.Request.URL.Path) })
	c.OnError(func(r *Response, err error) { s.t.Errorf("OnError(%s) = %v", r.Request.URL, err) })
	return c
}

// crawl visits link with c and waits for the crawl.
func (s *orderSite) crawl(c *Collector, link string) {
	s.t.Helper()
	if err := c.Visit(s.url(link)); err != nil {
		s.t.Fatalf("Visit(%s) error = %v", link, err)
	}
	c.Wait()
}

// rankByPath is a Prioritize hook that ranks a page by the number its
// path's last segment starts with ("/a/40-1" is 40); other pages keep
// theirs.
func rankByPath(r *Request) int {
	last := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	n, _, _ := strings.Cut(last, "-")
	if p, err := strconv.Atoi(n); err == nil {
		return p
	}
	return r.Priority
}

// TestPriorityFetchOrder: a crawl with one download at a time fetches the
// links of a page by the priority a Prioritize hook gives them from their
// URL, across hosts and within each host, and in the order they were found
// among equal priorities (across hosts too), in async and sync mode. The
// page's first three links are its three highest: the crawl takes those
// while the page's other links are still being queued.
func TestPriorityFetchOrder(t *testing.T) {
	links := map[string][]string{"/seed": {
		"a:/a/90", "b:/b/80", "a:/a/70",
		"a:/a/0", "b:/b/10", "a:/a/20", "b:/b/30", "a:/a/40-1", "a:/a/40-2",
		"b:/b/25-1", "a:/a/25-2", "b:/b/50", "a:/a/60",
	}}
	want := []string{"/seed", "/a/90", "/b/80", "/a/70", "/a/60", "/b/50", "/a/40-1", "/a/40-2",
		"/b/30", "/b/25-1", "/a/25-2", "/a/20", "/b/10", "/a/0"}
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprint("async=", async), func(t *testing.T) {
			s := newOrderSite(t, links, "a", "b")
			var calls atomic.Int32
			c := s.collector(async, Prioritize(func(r *Request) int {
				calls.Add(1)
				return rankByPath(r)
			}))
			var wrong []string
			var mu sync.Mutex
			c.OnRequest(func(r *Request) {
				if want := rankByPath(r); r.Priority != want {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: %d, want %d", r.URL.Path, r.Priority, want))
					mu.Unlock()
				}
			})
			s.crawl(c, "a:/seed")
			if got := s.fetched(); !slices.Equal(got, want) {
				t.Errorf("fetch order:\n got %v\nwant %v", got, want)
			}
			if len(wrong) > 0 {
				t.Errorf("Request.Priority in OnRequest: %v", wrong)
			}
			if n := calls.Load(); n != int32(len(want)) {
				t.Errorf("Prioritize called %d times, want %d (once per request)", n, len(want))
			}
		})
	}
}

// TestPriorityCrawlOrder: BreadthFirst takes shallower pages first (a
// Visit made at depth 1 during the crawl goes before the depth-2 pages
// waiting), DepthFirst deeper ones (a chain of pages is followed to its end
// before the root's other links), on one small tree. Without either, links
// wait in the order they were found.
func TestPriorityCrawlOrder(t *testing.T) {
	const siblings = 30
	links := map[string][]string{"/": {"a:/d1"}}
	for i := 1; i <= siblings; i++ {
		links["/"] = append(links["/"], fmt.Sprintf("a:/s%d", i))
	}
	for i := 1; i < 6; i++ {
		links[fmt.Sprintf("/d%d", i)] = []string{fmt.Sprintf("a:/d%d", i+1)}
	}
	pos := func(order []string, p string) int {
		i := slices.Index(order, p)
		if i < 0 {
			t.Fatalf("%s never fetched: %v", p, order)
		}
		return i
	}
	for _, tt := range []struct {
		name  string
		opt   []CollectorOption
		check func(t *testing.T, order []string, depth map[string]int)
	}{
		{"BreadthFirst", []CollectorOption{BreadthFirst()}, func(t *testing.T, order []string, depth map[string]int) {
			// The shallower the earlier, but for the few requests the
			// crawl took before a page's links were queued.
			if late, s10 := pos(order, "/late"), pos(order, "/s10"); late > s10 {
				t.Errorf("/late (depth 1) fetched at %d, after /s10 (depth 2) at %d", late, s10)
			}
			for i := 1; i <= siblings; i++ {
				if s, d2 := pos(order, fmt.Sprintf("/s%d", i)), pos(order, "/d2"); s > d2 {
					t.Errorf("/s%d (depth 2) fetched at %d, after /d2 (depth 3) at %d", i, s, d2)
				}
			}
		}},
		{"DepthFirst", []CollectorOption{DepthFirst()}, func(t *testing.T, order []string, depth map[string]int) {
			if d6, last := pos(order, "/d6"), pos(order, fmt.Sprintf("/s%d", siblings)); d6 > last {
				t.Errorf("/d6 (depth 7) fetched at %d, after /s%d (depth 2) at %d", d6, siblings, last)
			}
		}},
		{"none", nil, func(t *testing.T, order []string, depth map[string]int) {
			if d2, last := pos(order, "/d2"), pos(order, fmt.Sprintf("/s%d", siblings)); d2 < last {
				t.Errorf("/d2 fetched at %d, before /s%d at %d: not in the order found", d2, siblings, last)
			}
			if late, last := pos(order, "/late"), pos(order, fmt.Sprintf("/s%d", siblings)); late < last {
				t.Errorf("/late fetched at %d, before /s%d at %d: not in the order found", late, siblings, last)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newOrderSite(t, links, "a")
			c := s.collector(true, tt.opt...)
			var mu sync.Mutex
			depth := map[string]int{}
			var bad []string
			c.OnRequest(func(r *Request) {
				mu.Lock()
				defer mu.Unlock()
				depth[r.URL.Path] = r.Depth
				want := 0
				switch tt.name {
				case "BreadthFirst":
					want = -r.Depth
				case "DepthFirst":
					want = r.Depth
				}
				if r.Priority != want {
					bad = append(bad, fmt.Sprintf("%s at depth %d: priority %d, want %d", r.URL.Path, r.Depth, r.Priority, want))
				}
			})
			c.OnScraped(func(r *Response) {
				if r.Request.URL.Path == "/s1" {
					if err := c.Visit(s.url("a:/late")); err != nil {
						t.Errorf("Visit(/late) error = %v", err)
					}
				}
			})
			s.crawl(c, "a:/")
			order := s.fetched()
			if len(order) != siblings+8 {
				t.Fatalf("fetched %d pages, want %d: %v", len(order), siblings+8, order)
			}
			tt.check(t, order, depth)
			if len(bad) > 0 {
				t.Errorf("priorities: %v", bad)
			}
		})
	}
}

// TestPriorityHookSeesCrawlOrder: the crawl order's depth term applies
// first, and the hook sees the request with it; a priority is decided once
// per request (a Request.Retry keeps it: neither the crawl order nor the
// hook runs again).
func TestPriorityHookSeesCrawlOrder(t *testing.T) {
	s := newOrderSite(t, map[string][]string{"/": {"a:/x"}}, "a")
	var mu sync.Mutex
	seen := map[string][]int{}
	c := s.collector(false, BreadthFirst(), Prioritize(func(r *Request) int {
		mu.Lock()
		seen[r.URL.Path] = append(seen[r.URL.Path], r.Priority)
		mu.Unlock()
		return r.Priority * 10
	}))
	c.AllowURLRevisit = true
	var tries []int
	c.OnResponse(func(r *Response) {
		if r.Request.URL.Path != "/x" {
			return
		}
		tries = append(tries, r.Request.Priority)
		if len(tries) == 1 {
			if err := r.Request.Retry(); err != nil {
				t.Errorf("Retry() error = %v", err)
			}
		}
	})
	s.crawl(c, "a:/")
	if want := map[string][]int{"/": {-1}, "/x": {-2}}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("the hook saw %v, want %v", seen, want)
	}
	if !slices.Equal(tries, []int{-20, -20}) {
		t.Errorf("/x fetched with priorities %v, want [-20 -20]", tries)
	}
}

// TestPriorityRetryPolicyKeepsPriority: a request retried by the
// RetryPolicy waits for its retry with the priority it was admitted with.
func TestPriorityRetryPolicyKeepsPriority(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	var calls atomic.Int32
	c := NewCollector(IgnoreRobotsTxt(), RetryPolicy(RetryOptions{MaxAttempts: 2, BaseDelay: time.Millisecond, Statuses: []int{500}}),
		Prioritize(func(r *Request) int { calls.Add(1); return 7 }))
	var got []int
	c.OnRequest(func(r *Request) { got = append(got, r.Priority) })
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	if !slices.Equal(got, []int{7, 7}) || calls.Load() != 1 {
		t.Errorf("priorities per try %v, hook calls %d; want [7 7] and 1", got, calls.Load())
	}
}

// TestPriorityRange: a priority outside the int32 range, set on a request
// or given by the hook, refuses the request through the one door: the error
// wraps ErrPriorityRange, OnRefused hears it, Stats().Refused["priority"]
// counts it, nothing is fetched, and the request's MaxRequests slot and
// visited mark are given back. A panicking hook refuses its request to
// OnError.
func TestPriorityRange(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(IgnoreRobotsTxt(), MaxRequests(2), Prioritize(func(r *Request) int {
		switch r.URL.Path {
		case "/a":
			return math.MaxInt32 + 1
		case "/b":
			panic("hook failed")
		}
		return r.Priority
	}))
	var refused []error
	c.OnRefused(func(_ *Request, err error) { refused = append(refused, err) })
	var failed []error
	c.OnError(func(_ *Response, err error) { failed = append(failed, err) })

	if err := c.Visit(ts.URL + "/a"); !errors.Is(err, ErrPriorityRange) {
		t.Errorf("Visit(/a) with a hook answering MaxInt32+1: error = %v, want ErrPriorityRange", err)
	}
	if err := c.Visit(ts.URL + "/b"); !errors.Is(err, ErrCallbackPanic) {
		t.Errorf("Visit(/b) with a panicking hook: error = %v, want ErrCallbackPanic", err)
	}
	// A request's own priority, below the range.
	seed, err := c.newRequest(ts.URL+"/c", http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	seed.Priority = math.MinInt32 - 1
	if err := seed.Do(); !errors.Is(err, ErrPriorityRange) {
		t.Errorf("Do() of a request with Priority MinInt32-1: error = %v, want ErrPriorityRange", err)
	}
	if n := ts.total(); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
	if len(refused) != 2 || len(failed) != 1 || !errors.Is(failed[0], ErrCallbackPanic) {
		t.Errorf("OnRefused got %v, OnError got %v; want 2 refusals and the panic", refused, failed)
	}
	if n := c.Stats().Refused[RefusedPriority]; n != 2 {
		t.Errorf("Stats().Refused[%q] = %d, want 2", RefusedPriority, n)
	}
	// Neither a slot of MaxRequests(2) nor a visited mark was kept.
	for _, p := range []string{"/a", "/c"} {
		if ok, _ := c.HasVisited(ts.URL + p); ok {
			t.Errorf("HasVisited(%s) = true after the refusal, want false", p)
		}
	}
	for _, p := range []string{"/html", "/leaf"} {
		if err := c.Visit(ts.URL + p); err != nil {
			t.Errorf("Visit(%s) after the refusals: %v, want nil", p, err)
		}
	}
}

// TestPriorityLinksStartAtZero: a request sent with its own priority keeps
// it, and the links found on its page start at 0, not at their parent's;
// with no order and no hook nothing else changes a priority.
func TestPriorityLinksStartAtZero(t *testing.T) {
	s := newOrderSite(t, map[string][]string{"/": {"a:/x", "a:/y"}}, "a")
	c := s.collector(true)
	var mu sync.Mutex
	got := map[string]int{}
	c.OnRequest(func(r *Request) {
		mu.Lock()
		got[r.URL.Path] = r.Priority
		mu.Unlock()
	})
	root, err := c.newRequest(s.url("a:/"), http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	root.Priority = 42
	if err := root.Do(); err != nil {
		t.Fatalf("Do() error = %v", err)
	}
	c.Wait()
	if want := map[string]int{"/": 42, "/x": 0, "/y": 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("priorities seen by OnRequest = %v, want %v", got, want)
	}
}
