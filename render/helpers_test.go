package render

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// collectors' idle keep-alive connections excepted).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// requireChromium skips the test when no browser is installed, or fails it
// when MAGPIE_REQUIRE_CHROMIUM=1 (as CI sets).
func requireChromium(t testing.TB) {
	t.Helper()
	if _, err := findBrowser(""); err != nil {
		if os.Getenv("MAGPIE_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("MAGPIE_REQUIRE_CHROMIUM=1 but %v (install the chromium package)", err)
		}
		t.Skipf("skipping: %v (install chromium to run the rendering tests)", err)
	}
}

// newRenderer returns a Renderer whose browsers keep their temporary
// profiles under a directory of the test's own, so that browserProcs finds
// exactly the processes this test started. It is closed at cleanup.
func newRenderer(t *testing.T, opts ...Option) (*Renderer, string) {
	t.Helper()
	requireChromium(t)
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	r, err := New(opts...)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		if n := browserProcs(dir); n != 0 {
			t.Errorf("%d browser processes left after Close", n)
		}
	})
	return r, dir
}

// browserProcs counts the live processes whose --user-data-dir is under dir:
// the browser and every child it started (chromedp passes the flag on).
func browserProcs(dir string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte("--user-data-dir=" + dir)
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for arg := range bytes.SplitSeq(cmd, []byte{0}) {
			if bytes.HasPrefix(arg, want) {
				n++
				break
			}
		}
	}
	return n
}

// site is a local test site. Under /js/ the pages build their links with
// JavaScript and load /asset.js, which only a browser fetches; /plain/
// pages have static links and load /asset.js too.
//
//	/robots.txt        disallows /js/secret
//	/js/index          script adds links to /js/p1, /js/p2, /js/secret, /plain/a
//	/js/pN             script adds a link to /plain/fromN
//	/js/forever        keeps fetching /poll, never idle
//	/js/cookie         sets a cookie by Set-Cookie and one by document.cookie
//	/js/hang           the server holds the response until the test ends
//	/plain/...         static page; /plain/check records the Cookie header
type site struct {
	*httptest.Server
	mu     sync.Mutex // guards hits, times, cookie
	hits   map[string]int
	times  map[string][]time.Time
	cookie string
	// hang is closed at cleanup; /js/hang waits for it. hung receives a
	// value when /js/hang is entered.
	hang chan struct{}
	hung chan struct{}
}

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{hits: map[string]int{}, times: map[string][]time.Time{}, hang: make(chan struct{}), hung: make(chan struct{}, 1)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.hang)
		s.Close()
	})
	return s
}

// jsPage is a page whose body gets its links from a script.
func jsPage(title string, links ...string) string {
	var add strings.Builder
	for _, l := range links {
		fmt.Fprintf(&add, "a = document.createElement('a'); a.href = %q; a.textContent = %q; document.body.appendChild(a);\n", l, l)
	}
	return `<!DOCTYPE html><html><head><title>` + title + `</title><script src="/asset.js"></script></head><body>
<h1>` + title + `</h1>
<script>
setTimeout(() => { let a; ` + add.String() + ` }, 20);
</script></body></html>`
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	s.times[r.URL.Path] = append(s.times[r.URL.Path], time.Now())
	if r.URL.Path == "/plain/check" {
		s.cookie = r.Header.Get("Cookie")
	}
	s.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nDisallow: /js/secret\n")
	case p == "/asset.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, "window.assetLoaded = true;")
	case p == "/poll":
		fmt.Fprint(w, "again")
	case p == "/js/index":
		fmt.Fprint(w, jsPage("index", "/js/p1", "/js/p2", "/js/secret", "/plain/a"))
	case p == "/js/forever":
		fmt.Fprint(w, `<html><body><script>setInterval(() => fetch('/poll'), 50);</script></body></html>`)
	case p == "/js/cookie":
		http.SetCookie(w, &http.Cookie{Name: "server", Value: "s1", Path: "/"})
		fmt.Fprint(w, `<html><body><script>document.cookie = "script=j1; path=/";</script>
<p id="jar"></p><script>document.getElementById('jar').textContent = document.cookie;</script></body></html>`)
	case p == "/js/hang":
		select {
		case s.hung <- struct{}{}:
		default:
		}
		select {
		case <-s.hang:
		case <-r.Context().Done():
		}
	case strings.HasPrefix(p, "/js/p"):
		fmt.Fprint(w, jsPage(p, "/plain/from"+strings.TrimPrefix(p, "/js/p")))
	case strings.HasPrefix(p, "/js/"):
		fmt.Fprint(w, jsPage(p))
	case strings.HasPrefix(p, "/plain/"):
		fmt.Fprint(w, `<html><head><script src="/asset.js"></script></head><body><a href="/plain/leaf">leaf</a></body></html>`)
	default:
		http.NotFound(w, r)
	}
}

func (s *site) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *site) starts(path string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times[path]...)
}

// errorLog collects OnError calls.
type errorLog struct {
	mu   sync.Mutex // guards errs
	errs map[string][]error
}

func (l *errorLog) add(u string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = map[string][]error{}
	}
	l.errs[u] = append(l.errs[u], err)
}

func (l *errorLog) get(u string) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errs[u]
}
