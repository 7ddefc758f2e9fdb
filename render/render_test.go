package render

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// crawler is a collector that follows every link and records errors and
// the pages it analysed.
type crawler struct {
	*magpie.Collector
	errs    errorLog
	refused errorLog
	mu      sync.Mutex // guards pages
	pages   map[string]string
}

func newCrawler(f magpie.Fetcher, opts ...magpie.CollectorOption) *crawler {
	opts = append([]magpie.CollectorOption{magpie.Async()}, opts...)
	if f != nil {
		opts = append(opts, magpie.WithFetcher(f))
	}
	cr := &crawler{Collector: magpie.NewCollector(opts...), pages: map[string]string{}}
	cr.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	cr.OnResponse(func(r *magpie.Response) {
		cr.mu.Lock()
		cr.pages[r.Request.URL.Path] = string(r.Body)
		cr.mu.Unlock()
	})
	cr.OnError(func(r *magpie.Response, err error) { cr.errs.add(r.Request.URL.Path, err) })
	cr.OnRefused(func(r *magpie.Request, err error) { cr.refused.add(r.URL.Path, err) })
	return cr
}

func (cr *crawler) crawl(t *testing.T, u string) {
	t.Helper()
	if err := cr.Visit(u); err != nil {
		t.Fatalf("Visit(%q) error = %v", u, err)
	}
	cr.Wait()
}

func (cr *crawler) page(path string) (string, bool) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	s, ok := cr.pages[path]
	return s, ok
}

// TestJavaScriptLinks: links that scripts add are crawled when the pages are
// rendered, and a control run over HTTP finds none of them; only the pages
// the rule selects go to the browser (only they load /asset.js); robots.txt
// keeps a disallowed page from being rendered; after Wait no browser process
// is left.
func TestJavaScriptLinks(t *testing.T) {
	s := newSite(t)
	t.Run("control", func(t *testing.T) {
		cr := newCrawler(nil)
		cr.crawl(t, s.URL+"/js/index")
		for _, p := range []string{"/js/p1", "/js/p2", "/plain/a"} {
			if n := s.count(p); n != 0 {
				t.Errorf("without rendering the server saw %s %d times, want 0", p, n)
			}
		}
		if n := s.count("/asset.js"); n != 0 {
			t.Errorf("without rendering /asset.js was fetched %d times", n)
		}
	})
	t.Run("rendered", func(t *testing.T) {
		r, dir := newRenderer(t, Match(`/js/`), Timeout(15*time.Second))
		cr := newCrawler(r)
		cr.crawl(t, s.URL+"/js/index")
		if n := browserProcs(dir); n != 0 {
			t.Errorf("%d browser processes left after Wait, want 0", n)
		}
		for _, p := range []string{"/js/p1", "/js/p2", "/plain/a", "/plain/from1", "/plain/from2", "/plain/leaf"} {
			if n := s.count(p); n != 1 {
				t.Errorf("server saw %s %d times, want 1", p, n)
			}
		}
		// index, p1 and p2 were rendered: three loads of the asset only a
		// browser fetches; the /plain/ pages, which load it too, were not.
		if n := s.count("/asset.js"); n != 3 {
			t.Errorf("/asset.js fetched %d times, want 3 (the rendered pages only)", n)
		}
		if n := s.count("/js/secret"); n != 0 {
			t.Errorf("robots.txt-disallowed /js/secret reached the server %d times", n)
		}
		if errs := cr.refused.get("/js/secret"); len(errs) != 1 || !errors.Is(errs[0], magpie.ErrRobotsTxtBlocked) {
			t.Errorf("OnRefused for /js/secret = %v, want one ErrRobotsTxtBlocked", errs)
		}
		body, ok := cr.page("/js/index")
		if !ok {
			t.Fatal("no OnResponse for /js/index")
		}
		if want := `<a href="/js/p1">`; !strings.Contains(body, want) {
			t.Errorf("rendered body lacks %s:\n%s", want, body)
		}
	})
}

// TestMark: Mark renders one request when no rule selects it.
func TestMark(t *testing.T) {
	s := newSite(t)
	r, _ := newRenderer(t)
	cr := newCrawler(r, magpie.MaxDepth(2))
	cr.OnRequest(func(req *magpie.Request) {
		if req.URL.Path == "/js/p1" {
			Mark(req)
		}
	})
	cr.crawl(t, s.URL+"/js/p1")
	if n := s.count("/plain/from1"); n != 1 {
		t.Errorf("link of the marked page crawled %d times, want 1", n)
	}
	if n := s.count("/asset.js"); n != 1 {
		t.Errorf("/asset.js fetched %d times, want 1", n)
	}
}

func TestSelects(t *testing.T) {
	requireChromium(t)
	mk := func(raw, method string) *magpie.Request {
		u, _ := url.Parse(raw)
		return &magpie.Request{URL: u, Method: method, Ctx: magpie.NewContext()}
	}
	tests := []struct {
		name string
		opts []Option
		req  *magpie.Request
		want bool
	}{
		{"no rule", nil, mk("http://a.example/x", "GET"), false},
		{"all", []Option{All()}, mk("http://a.example/x", "GET"), true},
		{"all but POST", []Option{All()}, mk("http://a.example/x", "POST"), false},
		{"match", []Option{Match(`/x$`)}, mk("http://a.example/x", "GET"), true},
		{"no match", []Option{Match(`/y$`)}, mk("http://a.example/x", "GET"), false},
		{"host", []Option{Hosts("*.example")}, mk("http://a.example:8080/x", "GET"), true},
		{"other host", []Option{Hosts("*.example")}, mk("http://a.test/x", "GET"), false},
		{"host and match", []Option{Hosts("*.example"), Match(`/y`)}, mk("http://a.example/x", "GET"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := r.Selects(tt.req); got != tt.want {
				t.Errorf("Selects(%s %s) = %v, want %v", tt.req.Method, tt.req.URL, got, tt.want)
			}
		})
	}
	if _, err := New(Match("(")); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New(Match(\"(\")) error = %v, want ErrInvalidOption", err)
	}
	if _, err := New(Tabs(0)); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New(Tabs(0)) error = %v, want ErrInvalidOption", err)
	}
	if _, err := New(BrowserPath("/nonexistent/chrome")); !errors.Is(err, ErrNoBrowser) {
		t.Errorf("New(BrowserPath(missing)) error = %v, want ErrNoBrowser", err)
	}
}

// TestTimeout: a page that never settles (it keeps fetching) and a selector
// that never appears time out, each reported to OnError exactly once with
// ErrTimeout; the crawl goes on with the other pages.
func TestTimeout(t *testing.T) {
	s := newSite(t)
	t.Run("network never idle", func(t *testing.T) {
		// The timeout also bounds /js/p1, which must render: long enough
		// for a browser on a loaded machine, short enough for a test.
		r, _ := newRenderer(t, Match(`/js/`), Timeout(6*time.Second))
		cr := newCrawler(r)
		if err := cr.Visit(s.URL + "/js/forever"); err != nil {
			t.Fatal(err)
		}
		cr.crawl(t, s.URL+"/js/p1")
		errs := cr.errs.get("/js/forever")
		if len(errs) != 1 || !errors.Is(errs[0], ErrTimeout) {
			t.Fatalf("OnError for /js/forever = %v, want one ErrTimeout", errs)
		}
		if n := s.count("/plain/from1"); n != 1 {
			t.Errorf("the crawl did not go on: /plain/from1 seen %d times", n)
		}
	})
	t.Run("selector never appears", func(t *testing.T) {
		r, _ := newRenderer(t, Match(`/js/`), Timeout(time.Second), NetworkIdle(0), WaitSelector("#never"))
		cr := newCrawler(r)
		cr.crawl(t, s.URL+"/js/p2")
		errs := cr.errs.get("/js/p2")
		if len(errs) != 1 || !errors.Is(errs[0], ErrTimeout) {
			t.Fatalf("OnError for /js/p2 = %v, want one ErrTimeout", errs)
		}
	})
}

// TestLimitRules: with Parallelism 1 and a Delay, the server sees the
// rendered pages start at least Delay apart.
func TestLimitRules(t *testing.T) {
	s := newSite(t)
	r, _ := newRenderer(t, Match(`/js/`), NetworkIdle(0))
	const delay = 300 * time.Millisecond
	cr := newCrawler(r, magpie.MaxDepth(1))
	if err := cr.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 1, Delay: delay}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/js/a", "/js/b", "/js/c", "/js/d"} {
		if err := cr.Visit(s.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	cr.Wait()
	var starts []time.Time
	for _, p := range []string{"/js/a", "/js/b", "/js/c", "/js/d"} {
		ts := s.starts(p)
		if len(ts) != 1 {
			t.Fatalf("server saw %s %d times, want 1", p, len(ts))
		}
		starts = append(starts, ts[0])
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < delay {
			t.Errorf("rendered pages %d and %d started %v apart, want >= %v", i-1, i, gap, delay)
		}
	}
}

// TestCookies: the jar's cookies reach the browser, and the cookies a
// rendered page set (Set-Cookie and document.cookie) are sent by a later
// HTTP request.
func TestCookies(t *testing.T) {
	s := newSite(t)
	r, _ := newRenderer(t, Match(`/js/`))
	cr := newCrawler(r, magpie.MaxDepth(1))
	if err := cr.SetCookies(s.URL+"/", []*http.Cookie{{Name: "jar", Value: "j0"}}); err != nil {
		t.Fatal(err)
	}
	cr.crawl(t, s.URL+"/js/cookie")
	body, _ := cr.page("/js/cookie")
	if !strings.Contains(body, "jar=j0") {
		t.Errorf("the page's document.cookie lacks the jar's cookie:\n%s", body)
	}
	cr.crawl(t, s.URL+"/plain/check")
	s.mu.Lock()
	got := s.cookie
	s.mu.Unlock()
	for _, want := range []string{"server=s1", "script=j1", "jar=j0"} {
		if !strings.Contains(got, want) {
			t.Errorf("HTTP request after the rendered page sent Cookie %q, want %s in it", got, want)
		}
	}
}

// TestBrowserKilled: a browser killed while a page loads fails that page
// once with ErrBrowserCrashed; the next page starts a new browser and the
// crawl goes on; nothing is left after Wait.
func TestBrowserKilled(t *testing.T) {
	s := newSite(t)
	r, dir := newRenderer(t, Match(`/js/`), Timeout(20*time.Second))
	cr := newCrawler(r, magpie.MaxDepth(0))
	killed := make(chan int, 1)
	go func() {
		<-s.hung
		r.lock <- struct{}{}
		pid := r.b.pid
		<-r.lock
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed <- pid
	}()
	cr.crawl(t, s.URL+"/js/hang")
	old := <-killed
	errs := cr.errs.get("/js/hang")
	if len(errs) != 1 || !errors.Is(errs[0], ErrBrowserCrashed) {
		t.Fatalf("OnError for /js/hang = %v, want one ErrBrowserCrashed", errs)
	}
	cr.crawl(t, s.URL+"/js/p1")
	if _, ok := cr.page("/js/p1"); !ok {
		t.Fatalf("no page after the crash; errors %v", cr.errs.get("/js/p1"))
	}
	if p, err := os.FindProcess(old); err == nil {
		if err := p.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("killed browser %d still exists", old)
		}
	}
	if n := browserProcs(dir); n != 0 {
		t.Errorf("%d browser processes left after Wait, want 0", n)
	}
}
