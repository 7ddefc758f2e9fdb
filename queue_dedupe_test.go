package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// TestRunQueueDoesNotPushDuplicateLinks: links of a queue run are marked
// visited only when leased, so the run must itself keep a link it already
// pushed from being pushed again. A fully connected site of 30 pages fits a
// queue of 40 entries only if it does; otherwise duplicates fill the queue,
// pushes fail with ErrQueueFull and links are lost.
func TestRunQueueDoesNotPushDuplicateLinks(t *testing.T) {
	const pages = 30
	var mu sync.Mutex
	fetched := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		for i := range pages {
			fmt.Fprintf(&b, `<a href="/p/%d">%d</a>`, i, i)
		}
		fmt.Fprint(w, b.String())
	}))
	defer srv.Close()

	c := NewCollector(IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var full sync.Once
	c.OnError(func(r *Response, err error) {
		if errors.Is(err, ErrQueueFull) {
			full.Do(func() { t.Errorf("OnError(%s) = %v: duplicates filled the queue", r.Request.URL, err) })
		}
	})
	q := storage.NewMemoryQueue(40)
	pushURL(t, q, srv.URL+"/p/0")
	if err := c.RunQueue(t.Context(), q, 4); err != nil {
		t.Fatalf("RunQueue() error = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range pages {
		if n := fetched[fmt.Sprintf("/p/%d", i)]; n != 1 {
			t.Errorf("/p/%d fetched %d times, want 1", i, n)
		}
	}
}
