package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// hostLog is a test server that records the paths it was asked for.
type hostLog struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newHostLog(t *testing.T, serve func(h *hostLog, w http.ResponseWriter, r *http.Request)) *hostLog {
	h := &hostLog{hits: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.mu.Unlock()
		serve(h, w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hostLog) count(p string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[p]
}

func (h *hostLog) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, v := range h.hits {
		n += v
	}
	return n
}

// TestSitemapScope: a sitemap on host A listing URLs on host B does not
// send the crawler to B (no robots.txt, no listed path): each such entry is
// refused with ErrSitemapOutOfScope. When B's robots.txt names the sitemap
// on A, A's sitemap (and a sitemap nested in it) may list B's URLs
// (sitemaps.org cross-submission), but still not a third host's.
func TestSitemapScope(t *testing.T) {
	var a *hostLog
	third := newHostLog(t, func(_ *hostLog, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "third") })
	b := newHostLog(t, func(_ *hostLog, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/for-b-index.xml\n", a.URL)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>b</p>")
		}
	})
	a = newHostLog(t, func(h *hostLog, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/sitemap.xml":
			fmt.Fprint(w, urlset(urlEntry(h.URL+"/own", ""), urlEntry(b.URL+"/victim", ""), urlEntry(b.URL+"/victim2", "")))
		case "/for-b-index.xml":
			fmt.Fprintf(w, `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>%s/for-b.xml</loc></sitemap></sitemapindex>`, h.URL)
		case "/for-b.xml":
			fmt.Fprint(w, urlset(urlEntry(b.URL+"/listed", ""), urlEntry(third.URL+"/elsewhere", "")))
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>a</p>")
		}
	})

	t.Run("another host is refused", func(t *testing.T) {
		c := NewCollector()
		_, refused, failed := crawlSitemap(t, c, func() error { return c.VisitSitemap(a.URL + "/sitemap.xml") })
		if n := b.total(); n != 0 {
			t.Errorf("host B got %d requests (robots.txt %d, /victim %d), want none", n, b.count("/robots.txt"), b.count("/victim"))
		}
		if a.count("/own") != 1 {
			t.Errorf("A's own listed page fetched %d times, want 1", a.count("/own"))
		}
		if len(refused) != 2 || !errors.Is(refused[0], ErrSitemapOutOfScope) || !errors.Is(refused[1], ErrSitemapOutOfScope) {
			t.Errorf("OnRefused got %v, want 2 × ErrSitemapOutOfScope", refused)
		}
		if n := c.Stats().Refused[RefusedSitemapScope]; n != 2 {
			t.Errorf("Stats().Refused[%q] = %d, want 2", RefusedSitemapScope, n)
		}
		if len(failed) != 0 {
			t.Errorf("OnError got %v", failed)
		}
	})
	t.Run("cross-submission through B's robots.txt", func(t *testing.T) {
		c := NewCollector(SitemapsFromRobots())
		_, refused, failed := crawlSitemap(t, c, func() error { return c.Visit(b.URL + "/start") })
		if b.count("/listed") != 1 {
			t.Errorf("B's page listed by the sitemap B's robots.txt names was fetched %d times, want 1", b.count("/listed"))
		}
		if n := third.total(); n != 0 {
			t.Errorf("a third host got %d requests, want none", n)
		}
		if len(refused) != 1 || !errors.Is(refused[0], ErrSitemapOutOfScope) {
			t.Errorf("OnRefused got %v, want 1 × ErrSitemapOutOfScope", refused)
		}
		if len(failed) != 0 {
			t.Errorf("OnError got %v", failed)
		}
	})
}
