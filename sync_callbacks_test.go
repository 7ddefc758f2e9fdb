package magpie

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
