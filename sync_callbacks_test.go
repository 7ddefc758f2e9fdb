package magpie

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSyncCallbacksTakeTurns: a collector without Async runs its callbacks
// one at a time, as Colly does, so a Colly program that appends to a plain
// slice from its callbacks has no data race (run with -race). Downloads may
// still overlap.
func TestSyncCallbacksTakeTurns(t *testing.T) {
	const pages = 60
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		if r.URL.Path == "/" {
			for i := range pages {
				fmt.Fprintf(&b, `<a href="/p/%d">p</a>`, i)
			}
		} else {
			// Every page links home (refused: visited) and to a leaf.
			fmt.Fprintf(&b, `<a href="/">home</a><a href="%s/leaf">leaf</a>`, strings.TrimSuffix(r.URL.Path, "/leaf"))
		}
		fmt.Fprintf(w, "<html><body><h1>%s</h1>%s</body></html>", r.URL.Path, b.String())
	}))
	t.Cleanup(ts.Close)

	c := NewCollector(IgnoreRobotsTxt(), MaxDepth(3))
	c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 8})
	// No lock anywhere: Colly's sync mode makes that safe.
	var events []string
	var headings []string
	c.OnRequest(func(r *Request) { events = append(events, "request "+r.URL.Path) })
	c.OnResponse(func(r *Response) { events = append(events, "response "+r.Request.URL.Path) })
	c.OnHTML("h1", func(e *HTMLElement) { headings = append(headings, e.Text) })
	c.OnHTML("a[href]", func(e *HTMLElement) {
		events = append(events, "link")
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnRefused(func(r *Request, err error) { events = append(events, "refused "+r.URL.Path) })
	c.OnScraped(func(r *Response) { events = append(events, "scraped "+r.Request.URL.Path) })

	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	// /, 60 pages, 60 leaves.
	if want := 1 + 2*pages; len(headings) != want {
		t.Errorf("OnHTML(h1) ran %d times, want %d", len(headings), want)
	}
	count := map[string]int{}
	for _, e := range events {
		kind, _, _ := strings.Cut(e, " ")
		count[kind]++
	}
	want := map[string]int{
		"request":  1 + 2*pages,
		"response": 1 + 2*pages,
		"scraped":  1 + 2*pages,
		"link":     pages + 2*pages + 2*pages, // root's, pages' two, leaves' two
		"refused":  pages + 2*pages,           // every link home, and each leaf's link to itself
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s events = %d, want %d", k, count[k], n)
		}
	}
}

// TestConcurrentCallbacksOption: with ConcurrentCallbacks (kept by Clone) a
// sync collector's callbacks may wait for one another: /a's and /b's each
// wait until the other has started, which never happens while they take turns.
func TestConcurrentCallbacksOption(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<a href="/a">a</a><a href="/b">b</a>`)
			return
		}
		fmt.Fprint(w, `<p>page</p>`)
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(IgnoreRobotsTxt(), ConcurrentCallbacks()).Clone()
	c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 2})
	// Each page's callback starts, then waits for the other's start.
	started := map[string]chan struct{}{"/a": make(chan struct{}), "/b": make(chan struct{})}
	other := map[string]string{"/a": "/b", "/b": "/a"}
	met := make(chan bool, 2)
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnHTML("p", func(e *HTMLElement) {
		p := e.Request.URL.Path
		close(started[p])
		select {
		case <-started[other[p]]:
			met <- true
		case <-time.After(time.Minute):
			met <- false
		}
	})
	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	for range 2 {
		if !<-met {
			t.Errorf("a callback never saw the other page's start: the callbacks took turns despite ConcurrentCallbacks")
		}
	}
}
