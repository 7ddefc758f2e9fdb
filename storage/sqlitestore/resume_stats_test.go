package sqlitestore

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// TestResumeCountsRequests: a crawl stopped part-way and resumed by a new
// collector over the same SQLite file (as a new process would) counts the
// requests it leases from the file and sends in Stats().Requests: as many as
// the responses it got, never 0 next to them.
func TestResumeCountsRequests(t *testing.T) {
	const pages = 13
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		if r.URL.Path == "/p/0" {
			for i := 1; i < pages; i++ {
				fmt.Fprintf(&b, `<a href="/p/%d">%d</a>`, i, i)
			}
		}
		fmt.Fprintf(w, "<html><body>%s</body></html>", b.String())
	}))
	defer srv.Close()
	dbPath := filepath.Join(t.TempDir(), "crawl.db")

	crawl := func(stopAfter int) magpie.Stats {
		s, err := Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := magpie.NewCollector()
		if err := c.SetStorage(s); err != nil {
			t.Fatal(err)
		}
		q, err := queue.New(2, s)
		if err != nil {
			t.Fatal(err)
		}
		c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		var n int
		var nmu sync.Mutex
		c.OnScraped(func(*magpie.Response) {
			nmu.Lock()
			defer nmu.Unlock()
			if n++; n == stopAfter {
				q.Stop()
			}
		})
		if err := q.Run(c); err != nil {
			t.Fatalf("Run() error = %v", err)
		}
		return c.Stats()
	}

	// The first run seeds the queue and stops after the first pages.
	seedQueue(t, dbPath, srv.URL+"/p/0")
	first := crawl(3)
	if first.Responses == 0 || first.Requests < first.Responses {
		// A download cut short by the stop was sent and got no response.
		t.Errorf("first run: Stats() requests %d, responses %d; want responses > 0 and requests >= responses", first.Requests, first.Responses)
	}
	resumed := crawl(-1)
	if resumed.Responses == 0 {
		t.Fatalf("the resumed run fetched nothing (first run: %d responses)", first.Responses)
	}
	if resumed.Requests != resumed.Responses {
		t.Errorf("resumed run: Stats() requests %d, responses %d; want equal (every leased entry sent counts)\n%v",
			resumed.Requests, resumed.Responses, resumed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != pages {
		t.Errorf("distinct pages served = %d, want %d", len(hits), pages)
	}
}
