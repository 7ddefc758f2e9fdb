package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// 1. 5,000 async Visits to a blocking server add a bounded number of goroutines.
func TestAsyncVisitsBoundedGoroutines(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	before := runtime.NumGoroutine()
	c := NewCollector(Async(), IgnoreRobotsTxt())
	for i := range 5000 {
		if err := c.Visit(fmt.Sprintf("%s/p%d", srv.URL, i)); err != nil {
			t.Fatalf("Visit #%d error = %v", i, err)
		}
	}
	added := runtime.NumGoroutine() - before
	t.Logf("goroutines added by 5000 async Visits: %d", added)
	if added > 300 {
		t.Errorf("goroutines added by 5000 async Visits = %d, want <= 300", added)
	}
	c.Stop()
	c.Wait()
}

// 2. robots.txt is obeyed by default, with the User-Agent actually sent, and on redirects.
func TestRobotsDefaultOn(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	var onErr, refused []error
	c.OnError(func(r *Response, err error) { onErr = append(onErr, err) })
	c.OnRefused(func(r *Request, err error) { refused = append(refused, err) })
	if err := c.Visit(ts.URL + "/secret"); !errors.Is(err, ErrRobotsTxtBlocked) {
		t.Errorf("Visit(/secret) error = %v, want ErrRobotsTxtBlocked", err)
	}
	if err := c.Visit(ts.URL + "/go-secret"); !errors.Is(err, ErrRobotsTxtBlocked) {
		t.Errorf("Visit(/go-secret) error = %v, want ErrRobotsTxtBlocked (redirect target)", err)
	}
	if ts.count("/secret") != 0 {
		t.Errorf("/secret fetched %d times, want 0", ts.count("/secret"))
	}
	// The redirect hop to /secret was attempted (the fetch of /go-secret
	// failed), so it goes to OnError; /secret itself was refused.
	if len(refused) != 1 || !errors.Is(refused[0], ErrRobotsTxtBlocked) {
		t.Errorf("OnRefused got %v, want 1 ErrRobotsTxtBlocked", refused)
	}
	if len(onErr) != 1 || !errors.Is(onErr[0], ErrRobotsTxtBlocked) {
		t.Errorf("OnError got %v, want 1 ErrRobotsTxtBlocked (the redirect)", onErr)
	}
	bad := NewCollector()
	bad.OnRequest(func(r *Request) { r.Headers.Set("User-Agent", "BadBot") })
	if err := bad.Visit(ts.URL + "/html"); !errors.Is(err, ErrRobotsTxtBlocked) {
		t.Errorf("Visit with UA BadBot set in OnRequest error = %v, want ErrRobotsTxtBlocked", err)
	}
	ign := NewCollector(IgnoreRobotsTxt())
	if err := ign.Visit(ts.URL + "/secret"); err != nil {
		t.Errorf("IgnoreRobotsTxt Visit(/secret) error = %v, want nil", err)
	}
}

func TestCollectorRobotsSingleFetch(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(Async())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { _ = c.Visit(fmt.Sprintf("%s/leaf?i=%d", ts.URL, i)) })
	}
	wg.Wait()
	c.Wait()
	if n := ts.count("/robots.txt"); n != 1 {
		t.Errorf("robots.txt fetched %d times, want 1", n)
	}
}

// 3. Every refusal goes to the caller and to OnRefused with its Request, and
// not to OnError, which is for requests that were attempted; Stats counts it.
func TestRefusalsReachOnRefused(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct {
		name   string
		opts   []CollectorOption
		url    string
		want   error
		reason string
	}{
		{"forbidden domain", []CollectorOption{DisallowedDomains("127.0.0.1")}, "/html", ErrForbiddenDomain, RefusedDomain},
		{"not allowed domain", []CollectorOption{AllowedDomains("example.com")}, "/html", ErrForbiddenDomain, RefusedDomain},
		{"forbidden url", []CollectorOption{DisallowedURLFilters(regexp.MustCompile("html"))}, "/html", ErrForbiddenURL, RefusedURLFilter},
		{"no filter match", []CollectorOption{URLFilters(regexp.MustCompile("nomatch"))}, "/html", ErrNoURLFiltersMatch, RefusedURLFilter},
		{"max requests", []CollectorOption{MaxRequests(1), func(c *Collector) { c.requestCount.Store(1) }}, "/html", ErrMaxRequests, RefusedMaxRequests},
		{"scheme", nil, "ftp://x/", ErrUnsupportedScheme, RefusedScheme},
	}
	for _, tt := range tests {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", tt.name, async), func(t *testing.T) {
				c := NewCollector(append(tt.opts, Async(async))...)
				var got []*Request
				var gotErr, onErr []error
				c.OnRefused(func(r *Request, err error) { got, gotErr = append(got, r), append(gotErr, err) })
				c.OnError(func(r *Response, err error) { onErr = append(onErr, err) })
				u := tt.url
				if strings.HasPrefix(u, "/") {
					u = ts.URL + u
				}
				err := c.Visit(u)
				c.Wait()
				if !errors.Is(err, tt.want) {
					t.Errorf("Visit(%q) error = %v, want %v", u, err, tt.want)
				}
				if len(got) != 1 || got[0] == nil || got[0].URL == nil || !errors.Is(gotErr[0], tt.want) {
					t.Fatalf("OnRefused calls = %d (%v), want 1 with the Request and %v", len(got), gotErr, tt.want)
				}
				if len(onErr) != 0 {
					t.Errorf("OnError got %v, want nothing for a refusal", onErr)
				}
				if n := c.Stats().Refused[tt.reason]; n != 1 {
					t.Errorf("Stats().Refused[%q] = %d, want 1 (all: %v)", tt.reason, n, c.Stats().Refused)
				}
			})
		}
	}
	t.Run("depth and revisit", func(t *testing.T) {
		c := NewCollector(MaxDepth(1))
		var errs []error
		c.OnRefused(func(r *Request, err error) { errs = append(errs, err) })
		c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.DOM.AttrOr("href", "")) })
		if err := c.Visit(ts.URL + "/"); err != nil {
			t.Fatalf("Visit(/) error = %v", err)
		}
		var ave *AlreadyVisitedError
		if err := c.Visit(ts.URL + "/"); !errors.As(err, &ave) {
			t.Errorf("Visit(/) again error = %v, want *AlreadyVisitedError", err)
		}
		depth := 0
		for _, e := range errs {
			if errors.Is(e, ErrMaxDepth) {
				depth++
			}
		}
		if depth != 3 || len(errs) != 4 {
			t.Errorf("OnRefused got %v, want 3 ErrMaxDepth and 1 AlreadyVisited", errs)
		}
	})
}

// 4. MaxRequests is exact under Async.
func TestMaxRequestsExactAsync(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(Async(), MaxRequests(5), IgnoreRobotsTxt())
	var refused atomic.Int32
	c.OnRefused(func(r *Request, err error) {
		if errors.Is(err, ErrMaxRequests) {
			refused.Add(1)
		}
	})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _ = c.Visit(fmt.Sprintf("%s/leaf?i=%d", ts.URL, i)) })
	}
	wg.Wait()
	c.Wait()
	if n := ts.total(); n != 5 {
		t.Errorf("server hits = %d, want 5", n)
	}
	if n := refused.Load(); n != 45 {
		t.Errorf("ErrMaxRequests to OnRefused = %d, want 45", n)
	}
}

// 5. 8 goroutines visiting the same 300 URLs fetch each once; fragments are one URL.
func TestDedupConcurrent(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(IgnoreRobotsTxt())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 300 {
				_ = c.Visit(fmt.Sprintf("%s/leaf?i=%d", ts.URL, i))
			}
		})
	}
	wg.Wait()
	if n := ts.count("/leaf"); n != 300 {
		t.Errorf("/leaf fetched %d times, want 300", n)
	}
	_ = c.Visit(ts.URL + "/html#a")
	if err := c.Visit(ts.URL + "/html#b"); err == nil {
		t.Errorf("Visit(/html#b) after /html#a error = nil, want AlreadyVisited")
	}
	if n := ts.count("/html"); n != 1 {
		t.Errorf("/html fetched %d times, want 1", n)
	}
}

// 6. Siblings get their own copy of the parent's Context.
func TestChildContextIsolated(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(Workers(1))
	var mu sync.Mutex
	seen := map[string]string{}
	c.OnRequest(func(r *Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Ctx.Get("who")
		mu.Unlock()
	})
	c.OnResponse(func(r *Response) {
		if r.Request.URL.Path == "/" {
			r.Ctx.Put("who", "root")
			return
		}
		r.Ctx.Put("who", r.Request.URL.Path) // must not leak to siblings
	})
	c.OnHTML(`a[href^="/"]`, func(e *HTMLElement) {
		if e.Request.Depth == 1 {
			_ = e.Request.Visit(e.DOM.AttrOr("href", ""))
		}
	})
	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		if seen[p] != "root" {
			t.Errorf("Ctx seen by %s = %q, want %q", p, seen[p], "root")
		}
	}
}

// 9. Redirect hops get the admission checks; the chain is recorded; credentials stay home.
func TestRedirects(t *testing.T) {
	ts := newTestServer(t)
	other := newTestServer(t) // "localhost" vs "127.0.0.1": a different host
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/to-other":
			http.Redirect(w, r, otherURL+"/html", http.StatusFound)
		case "/chain":
			http.Redirect(w, r, "/chain2", http.StatusFound)
		case "/chain2":
			http.Redirect(w, r, ts.URL+"/html", http.StatusFound)
		}
	}))
	defer hop.Close()
	t.Run("chain recorded", func(t *testing.T) {
		c := NewCollector(IgnoreRobotsTxt())
		var resp *Response
		c.OnResponse(func(r *Response) { resp = r })
		if err := c.Visit(hop.URL + "/chain"); err != nil {
			t.Fatal(err)
		}
		if len(resp.Redirects) != 2 || resp.Redirects[0].Path != "/chain" || resp.Request.URL.String() != ts.URL+"/html" {
			t.Errorf("Redirects = %v, final %v; want [/chain /chain2] and /html", resp.Redirects, resp.Request.URL)
		}
	})
	t.Run("forbidden domain", func(t *testing.T) {
		c := NewCollector(IgnoreRobotsTxt(), DisallowedDomains("localhost"))
		if err := c.Visit(hop.URL + "/to-other"); !errors.Is(err, ErrForbiddenDomain) {
			t.Errorf("Visit(/to-other) error = %v, want ErrForbiddenDomain", err)
		}
	})
	t.Run("depth", func(t *testing.T) {
		c := NewCollector(IgnoreRobotsTxt(), MaxDepth(2))
		if err := c.Visit(hop.URL + "/chain"); !errors.Is(err, ErrMaxDepth) {
			t.Errorf("Visit(/chain) error = %v, want ErrMaxDepth", err)
		}
	})
	t.Run("authorization stripped", func(t *testing.T) {
		c := NewCollector(IgnoreRobotsTxt())
		c.OnRequest(func(r *Request) {
			r.Headers.Set("Authorization", "Bearer secret")
			r.Headers.Set("Cookie", "a=b")
		})
		if err := c.Visit(hop.URL + "/to-other"); err != nil {
			t.Fatal(err)
		}
		if h := other.header("/html"); h.Get("Authorization") != "" || h.Get("Cookie") != "" {
			t.Errorf("other host got Authorization %q Cookie %q, want none", h.Get("Authorization"), h.Get("Cookie"))
		}
	})
}

// Stop mid-crawl returns and leaks no goroutines; a panicking callback is reported.
func TestStopMidCrawl(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	before := runtime.NumGoroutine()
	c := NewCollector(Async(), IgnoreRobotsTxt())
	for i := range 100 {
		_ = c.Visit(fmt.Sprintf("%s/p%d", srv.URL, i))
	}
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	c.Stop()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after Stop")
	}
	c.shared.backend.get().CloseIdleConnections()
	// The transport's connection goroutines exit asynchronously after
	// CloseIdleConnections; give them a bounded number of yields.
	var after int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		if after = runtime.NumGoroutine(); after <= before+2 {
			break
		}
	}
	if after > before+2 {
		t.Errorf("goroutines after Stop = %d, before = %d", after, before)
	}
}
