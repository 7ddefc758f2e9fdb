package extensions

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// site serves pages whose links are given by a map, and records the
// headers each path was requested with.
type site struct {
	*httptest.Server
	mu   sync.Mutex // guards seen
	seen map[string][]http.Header
}

func newSite(t *testing.T, links map[string][]string) *site {
	t.Helper()
	s := &site{seen: map[string][]http.Header{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.seen[r.URL.Path] = append(s.seen[r.URL.Path], r.Header.Clone())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>")
		for _, l := range links[r.URL.Path] {
			fmt.Fprintf(w, `<a href="%s">x</a>`, l)
		}
		fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) headers(path string) []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[path]
}

var tree = map[string][]string{
	"/":  {"/a", "/b#frag"},
	"/a": {"/a1", "/a2", "/"},
	"/b": {"/b1", "/b2"},
}

func TestReferer(t *testing.T) {
	run := map[string]func(t *testing.T, c *magpie.Collector, u string){
		"async": func(t *testing.T, c *magpie.Collector, u string) {
			if err := c.Visit(u); err != nil {
				t.Fatalf("Visit(%q) error = %v, want nil", u, err)
			}
			c.Wait()
		},
		"queue": func(t *testing.T, c *magpie.Collector, u string) {
			q, err := queue.New(3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.AddURL(u); err != nil {
				t.Fatal(err)
			}
			if err := q.Run(c); err != nil {
				t.Fatalf("Run() error = %v, want nil", err)
			}
		},
	}
	for name, crawl := range run {
		t.Run(name, func(t *testing.T) {
			s := newSite(t, tree)
			c := magpie.NewCollector(magpie.Async(), magpie.Workers(4))
			Referer(c)
			c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			crawl(t, c, s.URL+"/#top")
			want := map[string]string{
				"/": "", "/a": s.URL + "/", "/b": s.URL + "/",
				"/a1": s.URL + "/a", "/a2": s.URL + "/a", "/b1": s.URL + "/b", "/b2": s.URL + "/b",
			}
			for path, ref := range want {
				hs := s.headers(path)
				if len(hs) != 1 {
					t.Errorf("%s fetched %d times, want 1", path, len(hs))
					continue
				}
				if got := hs[0].Get("Referer"); got != ref {
					t.Errorf("Referer of %s = %q, want %q", path, got, ref)
				}
			}
		})
	}
}

func TestRefererKeepsExplicitHeader(t *testing.T) {
	s := newSite(t, map[string][]string{"/": {"/a"}})
	c := magpie.NewCollector()
	Referer(c)
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		r, err := e.Request.New(http.MethodGet, e.Request.AbsoluteURL(e.Attr("href")), nil)
		if err != nil {
			t.Error(err)
			return
		}
		r.Headers.Set("Referer", "https://elsewhere.test/")
		_ = r.Do()
	})
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if hs := s.headers("/a"); len(hs) != 1 || hs[0].Get("Referer") != "https://elsewhere.test/" {
		t.Errorf("/a requests = %v, want one with the explicit Referer", hs)
	}
}

func TestURLLengthFilter(t *testing.T) {
	s := newSite(t, nil)
	c := magpie.NewCollector()
	URLLengthFilter(c, len(s.URL)+10)
	tests := []struct {
		path    string
		fetched bool
	}{
		{path: "/short", fetched: true},
		{path: "/exactly10", fetched: true},
		{path: "/" + strings.Repeat("x", 10), fetched: false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if err := c.Visit(s.URL + tt.path); err != nil {
				t.Fatalf("Visit(%q) error = %v, want nil (an abort is silent)", tt.path, err)
			}
			if got := len(s.headers(tt.path)) == 1; got != tt.fetched {
				t.Errorf("Visit(%q) fetched = %v, want %v", tt.path, got, tt.fetched)
			}
		})
	}
}

var (
	desktopRE = regexp.MustCompile(`^Mozilla/5\.0 \((Windows NT 10\.0; Win64; x64|Macintosh; Intel Mac OS X 10[._]15(_7)?|X11; (Ubuntu; )?Linux x86_64)(; rv:\d{3}\.0)?\) ` +
		`(AppleWebKit/537\.36 \(KHTML, like Gecko\) Chrome/\d{3}\.0\.0\.0 Safari/537\.36( Edg/\d{3}\.0\.0\.0)?` +
		`|Gecko/20100101 Firefox/\d{3}\.0` +
		`|AppleWebKit/605\.1\.15 \(KHTML, like Gecko\) Version/1[78]\.\d Safari/605\.1\.15)$`)
	mobileRE = regexp.MustCompile(`^Mozilla/5\.0 (\(Linux; Android 10; K\) AppleWebKit/537\.36 \(KHTML, like Gecko\) Chrome/\d{3}\.0\.0\.0 Mobile Safari/537\.36` +
		`|\(Android 1\d; Mobile; rv:\d{3}\.0\) Gecko/\d{3}\.0 Firefox/\d{3}\.0` +
		`|\(iPhone; CPU iPhone OS 1[78]_\d like Mac OS X\) AppleWebKit/605\.1\.15 \(KHTML, like Gecko\) (Version/1[78]\.\d|CriOS/\d{3}\.0\.0\.0) Mobile/15E148 Safari/604\.1)$`)
)

func TestUserAgentStrings(t *testing.T) {
	tests := []struct {
		name     string
		gen      func(func(int) int) string
		re       *regexp.Regexp
		families []string
	}{
		{"desktop", desktopUserAgent, desktopRE, []string{" Chrome/", " Edg/", " Firefox/", " Version/"}},
		{"mobile", mobileUserAgent, mobileRE, []string{"Android 10; K", "Mobile; rv:", "Version/", "CriOS/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			seen := map[string]bool{}
			for range 2000 {
				ua := tt.gen(r.IntN)
				if !tt.re.MatchString(ua) {
					t.Fatalf("%s User-Agent %q does not have a browser's format", tt.name, ua)
				}
				for _, f := range tt.families {
					if strings.Contains(ua, f) {
						seen[f] = true
					}
				}
			}
			for _, f := range tt.families {
				if !seen[f] {
					t.Errorf("%s User-Agents never contain %q in 2000 draws", tt.name, f)
				}
			}
		})
	}
}

func TestRandomUserAgent(t *testing.T) {
	tests := []struct {
		name string
		ext  func(*magpie.Collector)
		re   *regexp.Regexp
	}{
		{"RandomUserAgent", RandomUserAgent, desktopRE},
		{"RandomMobileUserAgent", RandomMobileUserAgent, mobileRE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t, nil)
			c := magpie.NewCollector(magpie.Async())
			tt.ext(c)
			const n = 40
			for i := range n {
				if err := c.Visit(fmt.Sprintf("%s/p%d", s.URL, i)); err != nil {
					t.Fatal(err)
				}
			}
			c.Wait()
			distinct := map[string]bool{}
			for i := range n {
				hs := s.headers(fmt.Sprintf("/p%d", i))
				if len(hs) != 1 {
					t.Fatalf("/p%d fetched %d times, want 1", i, len(hs))
				}
				ua := hs[0].Get("User-Agent")
				if !tt.re.MatchString(ua) {
					t.Errorf("User-Agent of /p%d = %q, want a browser's", i, ua)
				}
				distinct[ua] = true
			}
			if len(distinct) < 2 {
				t.Errorf("%d requests used %d distinct User-Agents, want a new draw per request", n, len(distinct))
			}
		})
	}
}
