package magpie

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
)

// pendingBytesBound is the most live heap one pending link of an async crawl
// may hold: its place in the in-memory frontier and its visited mark. The
// frontier keeps a compact entry (URL bytes, depth, key, a reference to what
// the page's links share) and builds the Request when it leaves, so a
// pending URL costs about 150 bytes; a full Request in the frontier cost
// about 1.3 KB.
const pendingBytesBound = 400

// measurePendingBytes starts an async crawl whose seed page makes n links
// with Request.Visit while every fetch of a link blocks, and returns the live
// heap the n pending links hold, per link (runtime.MemStats.HeapAlloc after
// a GC, before and after the Visits, inside the seed's callback).
func measurePendingBytes(t testing.TB, n int) float64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			fmt.Fprint(w, "seed")
			return
		}
		// A link's fetch waits for the end of the test, so the links stay
		// pending.
		select {
		case <-ctx.Done():
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	c := NewCollector(Async(true), Workers(1), StdlibContext(ctx), IgnoreRobotsTxt())
	var per float64
	var visitErr error
	c.OnResponse(func(r *Response) {
		if r.Request.URL.Path != "/" {
			return
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			if err := r.Request.Visit(fmt.Sprintf("/page/%d/item", i)); err != nil && visitErr == nil {
				visitErr = err
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		cancel()
	})
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit(seed) error = %v", err)
	}
	c.Wait()
	if visitErr != nil {
		t.Fatalf("Request.Visit error = %v", visitErr)
	}
	return per
}

// TestPendingURLBytes: a pending link costs bytes, not kilobytes (issue 29).
func TestPendingURLBytes(t *testing.T) {
	per := measurePendingBytes(t, 20000)
	t.Logf("%.0f bytes per pending URL (frontier entry and visited mark)", per)
	if per > pendingBytesBound {
		t.Errorf("a pending URL holds %.0f bytes of heap, want at most %d", per, pendingBytesBound)
	}
}

// BenchmarkPendingURLBytes reports the live heap per pending URL of an
// async crawl as the metric B/pending.
func BenchmarkPendingURLBytes(b *testing.B) {
	var per float64
	for b.Loop() {
		per = measurePendingBytes(b, 100000)
	}
	b.ReportMetric(per, "B/pending")
}
