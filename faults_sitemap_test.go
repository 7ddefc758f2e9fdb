package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// TestSitemapNestingBounded serves a sitemap index whose every level names a
// new index (and one page): the crawl reads MaxSitemapNesting+1 index
// documents, refuses the next level's entry once with ErrSitemapNesting, and
// ends, in sync, async and queue runs (where the level travels in the
// queue entry).
func TestSitemapNestingBounded(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		base := "http://" + r.Host
		switch {
		case r.URL.Path == "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nSitemap: %s/idx/0.xml\n", base)
		case strings.HasPrefix(r.URL.Path, "/idx/"):
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/idx/"), ".xml"))
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>%[1]s/idx/%[2]d.xml</loc></sitemap>
  <sitemap><loc>%[1]s/pages/%[3]d.xml</loc></sitemap>
</sitemapindex>`, base, n+1, n)
		case strings.HasPrefix(r.URL.Path, "/pages/"):
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, urlset(urlEntry(base+"/page"+strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/pages/"), ".xml"), "")))
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>page</p>")
		}
	}))
	defer srv.Close()

	tests := []struct {
		name string
		run  func(t *testing.T, c *Collector)
	}{
		{"sync", func(t *testing.T, c *Collector) {
			if err := c.VisitSitemap(srv.URL + "/idx/0.xml"); err != nil {
				t.Errorf("VisitSitemap() error = %v", err)
			}
		}},
		{"async", func(t *testing.T, c *Collector) {
			c.Async = true
			if err := c.VisitSitemap(srv.URL + "/idx/0.xml"); err != nil {
				t.Errorf("VisitSitemap() error = %v", err)
			}
			c.Wait()
		}},
		{"queue", func(t *testing.T, c *Collector) {
			// robots.txt names the index; its nested documents go
			// through the queue storage.
			SitemapsFromRobots()(c)
			c.IgnoreRobotsTxt = false
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			pushURL(t, q, srv.URL+"/start")
			if err := c.RunQueue(t.Context(), q, 2); err != nil {
				t.Errorf("RunQueue() error = %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			clear(hits)
			mu.Unlock()
			c := NewCollector(IgnoreRobotsTxt(), MaxDepth(3))
			var refused []error
			var refusedURLs []string
			c.OnRefused(func(r *Request, err error) {
				mu.Lock()
				refused = append(refused, err)
				refusedURLs = append(refusedURLs, r.URL.Path)
				mu.Unlock()
			})
			var errs []error
			c.OnError(func(_ *Response, err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			})
			tt.run(t, c)
			mu.Lock()
			defer mu.Unlock()
			for n := range MaxSitemapNesting + 1 {
				p := fmt.Sprintf("/idx/%d.xml", n)
				if hits[p] != 1 {
					t.Errorf("%s fetched %d times, want 1", p, hits[p])
				}
				want := 1
				if n == MaxSitemapNesting {
					want = 0 // its sitemap is an entry of the deepest index
				}
				if pg := fmt.Sprintf("/page%d", n); hits[pg] != want {
					t.Errorf("%s (listed by a sitemap under %d indexes) fetched %d times, want %d", pg, n+1, hits[pg], want)
				}
			}
			deeper := fmt.Sprintf("/idx/%d.xml", MaxSitemapNesting+1)
			if hits[deeper] != 0 {
				t.Errorf("%s fetched %d times, want 0 (nested too deep)", deeper, hits[deeper])
			}
			nesting := 0
			for i, err := range refused {
				if errors.Is(err, ErrSitemapNesting) {
					nesting++
					if refusedURLs[i] != deeper && refusedURLs[i] != fmt.Sprintf("/pages/%d.xml", MaxSitemapNesting) {
						t.Errorf("refused %s with %v, want only the entries of %s", refusedURLs[i], err, fmt.Sprintf("/idx/%d.xml", MaxSitemapNesting))
					}
				}
			}
			if nesting != 2 {
				t.Errorf("OnRefused got %d ErrSitemapNesting refusals (%v), want 2 (both entries of the deepest index)", nesting, refused)
			}
			if got := c.Stats().Refused[RefusedSitemapNesting]; got != 2 {
				t.Errorf("Stats().Refused[%q] = %d, want 2", RefusedSitemapNesting, got)
			}
			if len(errs) != 0 {
				t.Errorf("OnError got %v, want nothing", errs)
			}
		})
	}
}
