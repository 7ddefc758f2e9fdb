package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// TestEarlierEntriesResume resumes a crawl from entries in the form
// earlier versions stored (every field written: ID, an empty Body, Ctx and
// Host, the GET method) on each durable store and in memory: they are
// crawled with their Context, headers, depth and parent, and the links
// found, stored in the compact form, are crawled too.
func TestEarlierEntriesResume(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) (storage.Queue, storage.Storage)
	}{
		{"memory", func(*testing.T) (storage.Queue, storage.Storage) { return &queue.InMemoryQueueStorage{}, nil }},
		{"sqlite", func(t *testing.T) (storage.Queue, storage.Storage) {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "crawl.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, s
		}},
		{"redis", func(t *testing.T) (storage.Queue, storage.Storage) {
			addr := os.Getenv("MAGPIE_REDIS_ADDR")
			if addr == "" {
				t.Skip("MAGPIE_REDIS_ADDR is not set")
			}
			s, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: fmt.Sprintf("magpietest-entries-%x", rand.Uint64())})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = s.Clear(context.Background())
				s.Close()
			})
			return s, s
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			srv := newTestServer(t, func(n int) []int {
				if n < 3 {
					return []int{3}
				}
				return nil
			})
			qs, visited := st.open(t)
			earlier := [][]byte{
				// queue.AddURL's entry with a Context value and a header.
				fmt.Appendf(nil, `{"URL":%q,"Method":"GET","Depth":1,"Body":null,"ID":3,"Ctx":{"k":"v"},"Headers":{"X-Test":["1"]},"Host":""}`, srv.page(1)),
				// A link of a crawl, admitted when it was pushed.
				fmt.Appendf(nil, `{"URL":%q,"Method":"GET","Depth":2,"Body":null,"ID":9,"Ctx":{},"Headers":{},"Host":"","Attempt":1,"CheckRevisit":true,"Admitted":true,"Parent":%q}`,
					srv.page(2), srv.page(0)),
			}
			if err := qs.Push(t.Context(), earlier...); err != nil {
				t.Fatal(err)
			}
			c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
			if visited != nil {
				if err := c.SetStorage(visited); err != nil {
					t.Fatal(err)
				}
			}
			type seen struct {
				ctx, header, parent string
				depth               int
			}
			var mu sync.Mutex
			got := map[string]seen{}
			c.OnRequest(func(r *magpie.Request) {
				mu.Lock()
				defer mu.Unlock()
				got[r.URL.Path] = seen{r.Ctx.Get("k"), r.Headers.Get("X-Test"), r.ParentURL(), r.Depth}
			})
			c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(href(e)) })
			q := mustNew(t, 2, qs)
			if err := runWithin(t, q, c, 30*time.Second); err != nil {
				t.Fatalf("Run() error = %v, want nil", err)
			}
			want := map[string]seen{
				"/p/1": {ctx: "v", header: "1", depth: 1},
				"/p/2": {parent: srv.page(0), depth: 2},
			}
			for path, w := range want {
				if got[path] != w {
					t.Errorf("request %s = %+v, want %+v", path, got[path], w)
				}
			}
			// /p/3 is linked from both: crawled once, from whichever came first.
			if s, ok := got["/p/3"]; !ok || (s.depth != 2 && s.depth != 3) {
				t.Errorf("request /p/3 = %+v, %v; want it crawled at depth 2 or 3", s, ok)
			}
			if f := srv.fetches(); len(f) != 3 || f["/p/1"] != 1 || f["/p/2"] != 1 || f["/p/3"] != 1 {
				t.Errorf("fetches = %v, want /p/1, /p/2, /p/3 once each", f)
			}
			if n, err := q.Size(); err != nil || n != 0 {
				t.Errorf("Size() after the run = %d, %v; want 0", n, err)
			}
		})
	}
}
