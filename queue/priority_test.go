package queue_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// TestAddURLDuringRunRanked: requests a callback adds with AddURL during
// Run are ranked by Prioritize as the run's links are, and stored under
// that priority, so the best of them is fetched first; AddRequest outside
// Run stores the Request's own Priority.
func TestAddURLDuringRunRanked(t *testing.T) {
	var mu sync.Mutex
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/seed" {
			fmt.Fprint(w, `<a href="/add/low">x</a><a href="/add/mid">x</a><a href="/add/top">x</a>`)
		}
	}))
	defer srv.Close()
	q, err := queue.New(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	seedURL, err := url.Parse(srv.URL + "/seed")
	if err != nil {
		t.Fatal(err)
	}
	seed := &magpie.Request{URL: seedURL, Method: http.MethodGet, Depth: 1, Priority: 100,
		Headers: &http.Header{}, Ctx: magpie.NewContext()}
	if err := q.AddRequest(seed); err != nil {
		t.Fatal(err)
	}
	// Before the seed in push order, after it by priority.
	if err := q.AddURL(srv.URL + "/plain"); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt(), magpie.Prioritize(func(r *magpie.Request) int {
		switch {
		case strings.HasSuffix(r.URL.Path, "/top"):
			return 10
		case strings.HasSuffix(r.URL.Path, "/low"):
			return -10
		}
		return r.Priority
	}))
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
			t.Error(err)
		}
	})
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
	// The seed and the next best entry (/plain) are leased together, two
	// per host; what the seed added is then leased by its priority.
	want := []string{"/seed", "/plain", "/add/top", "/add/mid", "/add/low"}
	if !slices.Equal(order, want) {
		t.Errorf("fetch order = %v, want %v", order, want)
	}
}
