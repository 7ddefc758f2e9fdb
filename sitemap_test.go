package magpie

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func urlset(entries ...string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + strings.Join(entries, "") + `</urlset>`
}

func urlEntry(loc, lastmod string) string {
	if lastmod == "" {
		return "<url><loc>" + loc + "</loc></url>"
	}
	return "<url><loc>" + loc + "</loc><lastmod>" + lastmod + "</lastmod></url>"
}

// sitemapSite serves robots.txt naming /sitemap_index.xml, an index of two
// gzip-compressed sitemaps, and the pages they list (one page is listed on
// another host, and one twice).
type sitemapSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newSitemapSite(t *testing.T) *sitemapSite {
	s := &sitemapSite{hits: map[string]int{}}
	var s1, s2 []byte
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private\nSitemap: %s/sitemap_index.xml\n", s.URL)
		case "/sitemap_index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>%[1]s/s1.xml.gz</loc><lastmod>2026-01-01</lastmod></sitemap>
  <sitemap><loc>%[1]s/s2.xml.gz</loc></sitemap>
</sitemapindex>`, s.URL)
		case "/s1.xml.gz":
			w.Header().Set("Content-Type", "application/x-gzip")
			_, _ = w.Write(s1)
		case "/s2.xml.gz":
			w.Header().Set("Content-Type", "application/gzip")
			_, _ = w.Write(s2)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<h1>%s</h1>", r.URL.Path)
		}
	}))
	t.Cleanup(s.Close)
	s1 = gzipped(t, urlset(
		urlEntry(s.URL+"/old", "2020-05-01"),
		urlEntry(s.URL+"/new", "2026-10-01T12:00:00+00:00"),
		urlEntry(s.URL+"/undated", ""),
	))
	s2 = gzipped(t, urlset(
		urlEntry(s.URL+"/p1", "2026-11-01"),
		urlEntry(s.URL+"/p1", "2026-11-01"),
		urlEntry(s.URL+"/private/x", ""),
		urlEntry("http://elsewhere.invalid/page", ""),
	))
	return s
}

func (s *sitemapSite) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[p]
}

// crawlSitemap runs c and returns the paths OnResponse saw and the errors
// of OnRefused and OnError.
func crawlSitemap(t *testing.T, c *Collector, start func() error) (pages []string, refused, failed []error) {
	t.Helper()
	var mu sync.Mutex
	c.OnResponse(func(r *Response) {
		mu.Lock()
		pages = append(pages, r.Request.URL.Path)
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
	if err := start(); err != nil {
		t.Fatalf("start error = %v", err)
	}
	c.Wait()
	slices.Sort(pages)
	return pages, refused, failed
}

func TestVisitSitemapIndexOfGzipSitemaps(t *testing.T) {
	s := newSitemapSite(t)
	host := mustURL(t, s.URL).Hostname()
	c := NewCollector(AllowedDomains(host), Async())
	pages, refused, failed := crawlSitemap(t, c, func() error { return c.VisitSitemap(s.URL + "/sitemap_index.xml") })
	if want := []string{"/new", "/old", "/p1", "/undated"}; !slices.Equal(pages, want) {
		t.Errorf("pages = %v, want %v (sitemap documents do not reach the callbacks)", pages, want)
	}
	var scope, robots, visited int
	for _, err := range refused {
		var ave *AlreadyVisitedError
		switch {
		case errors.Is(err, ErrSitemapOutOfScope): // another host: refused before the domain filter
			scope++
		case errors.Is(err, ErrRobotsTxtBlocked):
			robots++
		case errors.As(err, &ave):
			visited++
		}
	}
	if scope != 1 || robots != 1 || visited != 1 || len(refused) != 3 {
		t.Errorf("refusals %v: want 1 sitemap scope, 1 robots.txt, 1 already visited", refused)
	}
	if len(failed) != 0 {
		t.Errorf("OnError got %v, want nothing", failed)
	}
	for _, p := range []string{"/sitemap_index.xml", "/s1.xml.gz", "/s2.xml.gz", "/p1"} {
		if n := s.count(p); n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
}

func TestSitemapModifiedSince(t *testing.T) {
	s := newSitemapSite(t)
	c := NewCollector(Async(), AllowedDomains(mustURL(t, s.URL).Hostname()), SitemapModifiedSince(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	pages, _, _ := crawlSitemap(t, c, func() error { return c.VisitSitemap(s.URL + "/sitemap_index.xml") })
	if want := []string{"/new", "/p1", "/undated"}; !slices.Equal(pages, want) {
		t.Errorf("pages = %v, want %v (/old has a lastmod in 2020)", pages, want)
	}
}

func TestSitemapsFromRobots(t *testing.T) {
	s := newSitemapSite(t)
	host := mustURL(t, s.URL).Hostname()
	c := NewCollector(AllowedDomains(host), SitemapsFromRobots())
	pages, _, failed := crawlSitemap(t, c, func() error { return c.Visit(s.URL + "/start") })
	if want := []string{"/new", "/old", "/p1", "/start", "/undated"}; !slices.Equal(pages, want) {
		t.Errorf("pages = %v, want %v", pages, want)
	}
	if len(failed) != 0 {
		t.Errorf("OnError got %v", failed)
	}
	off := NewCollector()
	pages, _, _ = crawlSitemap(t, off, func() error { return off.Visit(s.URL + "/start") })
	if want := []string{"/start"}; !slices.Equal(pages, want) {
		t.Errorf("without SitemapsFromRobots pages = %v, want %v", pages, want)
	}
}

func TestSitemapLimitsAndErrors(t *testing.T) {
	var big strings.Builder
	big.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range MaxSitemapURLs + 5 {
		fmt.Fprintf(&big, "<url><loc>http://other.invalid/%d</loc></url>", i)
	}
	big.WriteString("</urlset>")
	oneGz := gzipped(t, urlset(urlEntry("http://other.invalid/one", "")))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big.xml":
			fmt.Fprint(w, big.String())
		case "/html.xml":
			fmt.Fprint(w, "<html><body>not a sitemap</body></html>")
		case "/broken.xml.gz":
			_, _ = w.Write([]byte{0x1f, 0x8b, 0x08, 0x00, 'x'})
		case "/broken-gzip":
			// Neither type nor path says gzip: the sitemap reader finds it.
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte{0x1f, 0x8b, 0x08, 0x00, 'x'})
		case "/one.gz":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(oneGz)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := NewCollector(AllowedDomains("127.0.0.1"), IgnoreRobotsTxt(), MaxBodySize(0))
	var mu sync.Mutex
	refused := 0
	var failed []error
	c.OnRefused(func(*Request, error) { mu.Lock(); refused++; mu.Unlock() })
	c.OnError(func(_ *Response, err error) { mu.Lock(); failed = append(failed, err); mu.Unlock() })
	if err := c.VisitSitemap(srv.URL + "/big.xml"); !errors.Is(err, ErrSitemapTooLarge) {
		t.Errorf("VisitSitemap(big) error = %v, want ErrSitemapTooLarge", err)
	}
	if refused != MaxSitemapURLs {
		t.Errorf("URLs admitted from an oversized sitemap = %d, want %d", refused, MaxSitemapURLs)
	}
	for _, p := range []string{"/html.xml", "/broken-gzip"} {
		if err := c.VisitSitemap(srv.URL + p); !errors.Is(err, ErrSitemapInvalid) {
			t.Errorf("VisitSitemap(%s) error = %v, want ErrSitemapInvalid", p, err)
		}
	}
	before := refused
	if err := c.VisitSitemap(srv.URL + "/one.gz"); err != nil || refused != before+1 {
		t.Errorf("VisitSitemap(/one.gz) = %v with %d URLs, want nil and 1", err, refused-before)
	}
	// A .gz path is decompressed as the body is read, so a broken one fails
	// the fetch itself.
	if err := c.VisitSitemap(srv.URL + "/broken.xml.gz"); err == nil {
		t.Error("VisitSitemap(/broken.xml.gz) error = nil")
	}
	if len(failed) != 4 {
		t.Errorf("OnError got %v, want 4 sitemap errors", failed)
	}

	// A sitemap cut by MaxBodySize is too large, not silently short.
	small := NewCollector(AllowedDomains("127.0.0.1"), IgnoreRobotsTxt(), MaxBodySize(1<<16))
	if err := small.VisitSitemap(srv.URL + "/big.xml"); !errors.Is(err, ErrSitemapTooLarge) {
		t.Errorf("VisitSitemap(big) with MaxBodySize 64 KiB error = %v, want ErrSitemapTooLarge", err)
	}
}
