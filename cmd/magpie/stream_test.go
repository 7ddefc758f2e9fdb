package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
)

// TestCrawlStreamsHTML: the crawl's own selectors (title, a[href]) take the
// streamed path, a --follow selector that looks above its element and
// --field do not, and the page items are the same either way.
func TestCrawlStreamsHTML(t *testing.T) {
	const n = 12
	site := newPagesSite(t, n, nil)
	run := func(t *testing.T, cfg crawlConfig) (magpie.Stats, map[string]pageRecord) {
		cfg.starts, cfg.allowLoopback, cfg.ignoreRobots, cfg.parallel = []string{site.URL + "/"}, true, true, 4
		var mu sync.Mutex
		recs := map[string]pageRecord{}
		st, err := crawl(t.Context(), cfg, &tally{}, func(_ context.Context, it *magpie.Item) error {
			if rec, ok := it.Value.(pageRecord); ok {
				mu.Lock()
				recs[rec.URL] = rec
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("crawl() error = %v", err)
		}
		return st, recs
	}
	st, streamed := run(t, crawlConfig{})
	if st.HTMLStreamed != n+1 || st.HTMLParsedWhole != 0 {
		t.Errorf("default selectors: %d pages streamed, %d parsed whole; want %d, 0", st.HTMLStreamed, st.HTMLParsedWhole, n+1)
	}
	// "html a[href]" needs the page's tree: no page streams, and the same
	// links are followed.
	st, parsed := run(t, crawlConfig{follow: "html a[href]"})
	if st.HTMLStreamed != 0 || len(parsed) != n+1 {
		t.Errorf("--follow 'html a[href]': %d pages streamed, %d page items; want 0, %d", st.HTMLStreamed, len(parsed), n+1)
	}
	if len(streamed) != n+1 {
		t.Errorf("streamed crawl wrote %d page items, want %d", len(streamed), n+1)
	}
	for u, want := range parsed {
		// A page is both linked from home (depth 2) and from the page
		// before it: its depth is that of whichever path a parallel
		// crawl admitted first, in either run. Everything else must agree.
		got := streamed[u]
		got.Depth, want.Depth = 0, 0
		if got != want {
			t.Errorf("page item of %s: streamed %+v, parsed whole %+v", u, got, want)
		}
	}
	home := streamed[site.URL+"/"]
	if home.Title != "home" || home.Links != n {
		t.Errorf("home page item = %+v, want title home, %d links", home, n)
	}
	if p := streamed[fmt.Sprintf("%s/p/%d", site.URL, 3)]; p.Title != "page 3" || p.Links != 1 {
		t.Errorf("/p/3 item = %+v, want title \"page 3\", 1 link", p)
	}
	// --field's selectors look into the whole document.
	st, _ = run(t, crawlConfig{fields: []field{{name: "h", css: "title"}}})
	if st.HTMLStreamed != 0 {
		t.Errorf("with --field: %d pages streamed, want 0", st.HTMLStreamed)
	}
}
