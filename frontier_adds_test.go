package magpie_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// TestAddURLDuplicatesCountedUnheard: during a queue run, a link added with
// q.AddURL that the run already pushed is refused as visited whether or not
// an OnRefused callback listens (without one no Request is built for it):
// the same pages are fetched once each, Stats().Refused["visited"] is the
// same, and with a listener it hears each of those refusals once.
func TestAddURLDuplicatesCountedUnheard(t *testing.T) {
	const pages = 12
	var mu sync.Mutex
	fetched := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		for i := range pages {
			fmt.Fprintf(&b, `<a href="/p/%d">%d</a><a href="/p/%d#again">again</a>`, i, i, i)
		}
		fmt.Fprint(w, b.String())
	}))
	defer srv.Close()

	crawl := func(listen bool) (visited uint64, heard int64) {
		mu.Lock()
		clear(fetched)
		mu.Unlock()
		q, err := queue.New(2, &queue.InMemoryQueueStorage{})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AddURL(srv.URL + "/p/0"); err != nil {
			t.Fatal(err)
		}
		c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
		c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
			if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
				t.Errorf("AddURL error = %v", err)
			}
		})
		var n atomic.Int64
		if listen {
			c.OnRefused(func(r *magpie.Request, err error) {
				if _, ok := errors.AsType[*magpie.AlreadyVisitedError](err); !ok {
					t.Errorf("OnRefused(%s) error = %v, want AlreadyVisitedError", r.URL, err)
				}
				n.Add(1)
			})
		}
		if err := q.Run(c); err != nil {
			t.Fatalf("Run() error = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range pages {
			if got := fetched["/p/"+strconv.Itoa(i)]; got != 1 {
				t.Errorf("listen=%v: /p/%d fetched %d times, want 1", listen, i, got)
			}
		}
		return c.Stats().Refused[magpie.RefusedVisited], n.Load()
	}
	unheard, _ := crawl(false)
	visited, heard := crawl(true)
	// Every page adds 2×pages links, of which only the first fetch of
	// each page is new: the rest are refused as visited, by either path.
	if want := uint64(pages*2*pages - (pages - 1)); unheard != want || visited != want {
		t.Errorf("Refused[visited] = %d without OnRefused, %d with it; want %d both", unheard, visited, want)
	}
	if heard != int64(visited) {
		t.Errorf("OnRefused heard %d refusals, Stats counted %d", heard, visited)
	}
}
