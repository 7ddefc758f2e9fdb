package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRobotsUnreachableWaitsWithoutWorkers: while host A's robots.txt
// answers 503, A's requests wait in the frontier; with one worker, host B's
// pages are all crawled meanwhile. When A's robots.txt comes back, its rules
// apply: /a is fetched, /x refused as disallowed (to OnRefused, not OnError).
func TestRobotsUnreachableWaitsWithoutWorkers(t *testing.T) {
	bDone := make(chan struct{})
	var robotsA atomic.Int32
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robotsA.Add(1)
			select {
			case <-bDone:
				fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
			default:
				http.Error(w, "down", http.StatusServiceUnavailable)
			}
			return
		}
		fmt.Fprint(w, "page")
	}))
	defer a.Close()
	const bPages = 5
	var bHits atomic.Int32
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if bHits.Add(1) == bPages {
			close(bDone)
		}
		fmt.Fprint(w, "page")
	}))
	defer b.Close()

	c := NewCollector(Async(), Workers(1))
	c.shared.robots.retryBase = 20 * time.Millisecond
	var mu sync.Mutex
	var fetched []string
	var refused, failed []error
	c.OnResponse(func(r *Response) {
		mu.Lock()
		fetched = append(fetched, r.Request.URL.String())
		mu.Unlock()
	})
	c.OnRefused(func(_ *Request, err error) {
		mu.Lock()
		refused = append(refused, err)
		mu.Unlock()
	})
	c.OnError(func(_ *Response, err error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
	})
	for _, u := range []string{a.URL + "/a", a.URL + "/x"} {
		if err := c.Visit(u); err != nil {
			t.Fatalf("Visit(%q) error = %v, want nil (it waits for robots.txt)", u, err)
		}
	}
	for i := range bPages {
		if err := c.Visit(fmt.Sprintf("%s/p%d", b.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Wait()

	if n := bHits.Load(); n != bPages {
		t.Errorf("host B pages fetched = %d, want %d", n, bPages)
	}
	mu.Lock()
	defer mu.Unlock()
	gotA := 0
	for _, u := range fetched {
		if u == a.URL+"/a" {
			gotA++
		}
		if u == a.URL+"/x" {
			t.Errorf("%s fetched although robots.txt disallows it", u)
		}
	}
	if gotA != 1 {
		t.Errorf("%s/a fetched %d times, want 1 (fetched: %v)", a.URL, gotA, fetched)
	}
	if len(refused) != 1 || !errors.Is(refused[0], ErrRobotsTxtBlocked) {
		t.Errorf("OnRefused got %v, want one ErrRobotsTxtBlocked for /x", refused)
	}
	if len(failed) != 0 {
		t.Errorf("OnError got %v, want nothing", failed)
	}
	if n := robotsA.Load(); n < 2 {
		t.Errorf("host A's robots.txt fetched %d times, want a retry", n)
	}
}

// TestRobotsUnavailableRefusesOnce: a robots.txt that never comes back
// refuses the host's requests once the attempts are spent, each once, with
// ErrRobotsTxtUnavailable (not ErrRobotsTxtBlocked), and no page is fetched.
func TestRobotsUnavailableRefusesOnce(t *testing.T) {
	var pages atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		pages.Add(1)
	}))
	defer srv.Close()
	c := NewCollector(Async())
	c.shared.robots.retryBase = 10 * time.Millisecond
	var mu sync.Mutex
	got := map[string][]error{}
	c.OnRefused(func(r *Request, err error) {
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], err)
		mu.Unlock()
	})
	for _, p := range []string{"/1", "/2", "/3"} {
		if err := c.Visit(srv.URL + p); err != nil {
			t.Fatalf("Visit(%s) error = %v", p, err)
		}
	}
	c.Wait()
	if n := pages.Load(); n != 0 {
		t.Errorf("pages fetched = %d, want 0", n)
	}
	for _, p := range []string{"/1", "/2", "/3"} {
		errs := got[p]
		if len(errs) != 1 || !errors.Is(errs[0], ErrRobotsTxtUnavailable) || errors.Is(errs[0], ErrRobotsTxtBlocked) {
			t.Errorf("OnRefused for %s got %v, want one ErrRobotsTxtUnavailable", p, errs)
		}
	}
	if n := c.Stats().Refused[RefusedRobotsUnavailable]; n != 3 {
		t.Errorf("Stats().Refused[%q] = %d, want 3", RefusedRobotsUnavailable, n)
	}
}

// TestRobotsRedirectScope: a robots.txt that redirects to a host outside
// AllowedDomains is not fetched from there (the 3xx allows everything), and
// more than five redirects are not followed.
func TestRobotsRedirectScope(t *testing.T) {
	var outside atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outside.Add(1)
		fmt.Fprint(w, "User-agent: *\nDisallow: /\n")
	}))
	defer other.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			// Another host name for the other server: outside AllowedDomains.
			http.Redirect(w, r, "http://localhost:"+portOf(t, other.URL)+"/robots.txt", http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer site.Close()

	c := NewCollector(AllowedDomains("127.0.0.1"))
	if err := c.Visit(site.URL + "/page"); err != nil {
		t.Fatalf("Visit error = %v, want nil (a robots.txt redirect out of scope allows all)", err)
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("the out-of-scope robots.txt was fetched %d times, want 0", n)
	}

	// Endless robots.txt redirects on the same host: five are followed.
	var hops atomic.Int32
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" || r.URL.Path == "/r" {
			hops.Add(1)
			http.Redirect(w, r, "/r", http.StatusMovedPermanently)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer loop.Close()
	c2 := NewCollector()
	if err := c2.Visit(loop.URL + "/page"); err != nil {
		t.Fatalf("Visit error = %v, want nil", err)
	}
	if n := hops.Load(); n != maxRobotsRedirects+1 {
		t.Errorf("robots.txt requests = %d, want %d (the first and five redirects)", n, maxRobotsRedirects+1)
	}
}

func portOf(t *testing.T, u string) string {
	t.Helper()
	return mustURL(t, u).Port()
}
