package magpie

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCacheSkipsTruncatedBody: a body cut at MaxBodySize is not the page, so
// it is not cached; the next crawl over the same CacheDir fetches the page
// again and sees the cut (Truncated), and a crawl without the cap gets the
// whole body, never a stale half.
func TestCacheSkipsTruncatedBody(t *testing.T) {
	page := strings.Repeat("x", 100)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(page))
	}))
	defer srv.Close()
	dir := t.TempDir()
	visit := func(opts ...CollectorOption) *Response {
		t.Helper()
		c := NewCollector(append([]CollectorOption{IgnoreRobotsTxt(), CacheDir(dir)}, opts...)...)
		var got *Response
		c.OnResponse(func(r *Response) { got = r })
		if err := c.Visit(srv.URL + "/page"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
		if got == nil {
			t.Fatal("OnResponse not called")
		}
		return got
	}
	for i := range 2 {
		r := visit(MaxBodySize(10))
		if !r.Truncated || len(r.Body) != 10 || r.FromCache {
			t.Errorf("capped crawl %d: Truncated %v, %d bytes, FromCache %v; want a fresh cut body of 10 bytes",
				i+1, r.Truncated, len(r.Body), r.FromCache)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("server hits after two capped crawls = %d, want 2 (a truncated body must not be cached)", n)
	}
	r := visit()
	if r.Truncated || string(r.Body) != page {
		t.Errorf("uncapped crawl: Truncated %v, %d bytes; want the whole page", r.Truncated, len(r.Body))
	}
	// The whole page is cached now, and replayed whole.
	r = visit()
	if !r.FromCache || r.Truncated || string(r.Body) != page {
		t.Errorf("replay: FromCache %v, Truncated %v, %d bytes; want the whole page from the cache", r.FromCache, r.Truncated, len(r.Body))
	}
}
