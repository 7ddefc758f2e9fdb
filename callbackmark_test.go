package magpie

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// newChainSite serves /p0 … /p(n-1): each page links to the next two, back
// to /p0 (visited already: a refusal) and to a page off the site's host
// list (refused by AllowedDomains), and has one <p> to emit.
func newChainSite(t *testing.T, n int) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.URL.Path[min(2, len(r.URL.Path)):])
		if r.URL.Path == "/robots.txt" || err != nil || i >= n {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<p>page %d</p><a class=own href="/p%d">next</a><a href="/p%d">after</a><a href="/p0">home</a><a href="http://elsewhere.test/">away</a>`,
			i, min(i+1, n-1), min(i+2, n-1))
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestNoGoroutineIDPerPage: a crawl looks up no goroutine ID per page, in
// sync mode (where a Visit from a callback must not wait for the crawl and
// the callbacks take turns), async mode and a queue run, with links followed
// by e.Request.Visit and by c.Visit from the callback, refusals heard by
// OnRefused, items through a pipeline and a Stop-free end. The count is the
// same for a crawl of 8 pages as for one of 40: none of it is per page.
func TestNoGoroutineIDPerPage(t *testing.T) {
	modes := []struct {
		name string
		run  func(t *testing.T, c *Collector, start string)
	}{
		{"sync", func(t *testing.T, c *Collector, start string) {
			if err := c.Visit(start); err != nil {
				t.Errorf("Visit() error = %v", err)
			}
		}},
		{"sync, one collector among many", func(t *testing.T, c *Collector, start string) {
			// Other collectors running callbacks at the same time take
			// marker frames of their own.
			others := make([]*Collector, markSlots-1)
			release := make(chan struct{})
			var entered, done sync.WaitGroup
			for i := range others {
				others[i] = NewCollector()
				entered.Add(1)
				done.Go(func() {
					others[i].region(func() { entered.Done(); <-release })
				})
			}
			entered.Wait()
			defer done.Wait()
			defer close(release)
			if err := c.Visit(start); err != nil {
				t.Errorf("Visit() error = %v", err)
			}
		}},
		{"async", func(t *testing.T, c *Collector, start string) {
			c.Async = true
			if err := c.Visit(start); err != nil {
				t.Errorf("Visit() error = %v", err)
			}
			c.Wait()
		}},
		{"queue, one thread", func(t *testing.T, c *Collector, start string) {
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			pushURL(t, q, start)
			if err := c.RunQueue(t.Context(), q, 1); err != nil {
				t.Errorf("RunQueue() error = %v", err)
			}
		}},
		{"queue, four threads", func(t *testing.T, c *Collector, start string) {
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			pushURL(t, q, start)
			if err := c.RunQueue(t.Context(), q, 4); err != nil {
				t.Errorf("RunQueue() error = %v", err)
			}
		}},
	}
	crawl := func(t *testing.T, run func(*testing.T, *Collector, string), pages int) (calls uint64) {
		ts := newChainSite(t, pages)
		c := NewCollector(AllowedDomains("127.0.0.1"), IgnoreRobotsTxt())
		var scraped, items, refused atomic.Int64
		c.OnHTML("a[href]", func(e *HTMLElement) {
			if e.Attr("class") == "own" {
				_ = c.Visit(e.Request.AbsoluteURL(e.Attr("href")))
				return
			}
			_ = e.Request.Visit(e.Attr("href"))
		})
		c.OnHTML("p", func(e *HTMLElement) { e.Emit(e.Text) })
		c.OnRefused(func(*Request, error) { refused.Add(1) })
		c.OnScraped(func(*Response) { scraped.Add(1) })
		c.Pipeline(func(context.Context, *Item) error { items.Add(1); return nil })
		before := goroutineIDCalls.Load()
		run(t, c, ts.URL+"/p0")
		calls = goroutineIDCalls.Load() - before
		if scraped.Load() != int64(pages) || items.Load() != int64(pages) || refused.Load() < int64(pages) {
			t.Errorf("%d pages: scraped %d, items %d, refused %d; want %d, %d, at least %d",
				pages, scraped.Load(), items.Load(), refused.Load(), pages, pages, pages)
		}
		return calls
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			small, large := crawl(t, m.run, 8), crawl(t, m.run, 40)
			if small != 0 || large != 0 {
				t.Errorf("goroutine-ID lookups: %d for 8 pages, %d for 40; want none", small, large)
			}
		})
	}
}

// TestCallingFromCallback: the callback mark tells a call from one of the
// collector's callbacks from a call elsewhere: another goroutine, a goroutine
// a callback started, and another collector's callback, with a marker frame
// and without one (more collectors run callbacks than there are frames).
func TestCallingFromCallback(t *testing.T) {
	for _, busy := range []int{0, markSlots} {
		t.Run(fmt.Sprintf("%d other collectors", busy), func(t *testing.T) {
			release := make(chan struct{})
			var entered, done sync.WaitGroup
			for range busy {
				o := NewCollector()
				entered.Add(1)
				done.Go(func() { o.region(func() { entered.Done(); <-release }) })
			}
			entered.Wait()
			defer done.Wait()
			defer close(release)
			c, other := NewCollector(), NewCollector()
			if c.callingFromCallback() {
				t.Error("outside every region: callingFromCallback() = true")
			}
			c.region(func() {
				if !c.callingFromCallback() {
					t.Error("in c's region: c.callingFromCallback() = false")
				}
				if other.callingFromCallback() {
					t.Error("in c's region: other.callingFromCallback() = true")
				}
				got := make(chan bool)
				go func() { got <- c.callingFromCallback() }()
				if <-got {
					t.Error("on a goroutine started in c's region: callingFromCallback() = true")
				}
				other.region(func() {
					if !c.callingFromCallback() || !other.callingFromCallback() {
						t.Error("in other's region inside c's: a collector does not see its own region")
					}
				})
			})
			other.region(func() {
				if c.callingFromCallback() {
					t.Error("in other's region only: c.callingFromCallback() = true")
				}
			})
			if c.callingFromCallback() {
				t.Error("after the region: callingFromCallback() = true")
			}
		})
	}
}

// BenchmarkCallbackMark compares what a Visit from a callback pays to know
// it is one (a look for the marker frame) with the goroutine-ID lookup it
// replaced, each 20 frames below the region.
func BenchmarkCallbackMark(b *testing.B) {
	c := NewCollector()
	var deep func(n int, f func())
	deep = func(n int, f func()) {
		if n == 0 {
			f()
			return
		}
		deep(n-1, f)
	}
	b.Run("callingFromCallback", func(b *testing.B) {
		c.region(func() {
			deep(20, func() {
				for b.Loop() {
					if !c.callingFromCallback() {
						b.Fatal("not in the region")
					}
				}
			})
		})
	})
	b.Run("goroutineID", func(b *testing.B) {
		deep(20, func() {
			for b.Loop() {
				if goroutineID() == 0 {
					b.Fatal("no ID")
				}
			}
		})
	})
	b.Run("region", func(b *testing.B) {
		for b.Loop() {
			c.region(func() {})
		}
	})
}
