package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// benchStore is a queue storage with the visited set the collector uses
// with it (nil: the collector's in-memory set).
type benchStore struct {
	q  storage.Queue
	st storage.Storage
}

// benchStores open the stores BenchmarkQueueCrawl runs on: memory, a
// SQLite file, and Redis at MAGPIE_REDIS_ADDR when it is set.
var benchStores = []struct {
	name string
	open func(b *testing.B) benchStore
}{
	{"memory", func(*testing.B) benchStore {
		return benchStore{q: &queue.InMemoryQueueStorage{MaxSize: queue.DefaultMaxSize}}
	}},
	{"sqlite", func(b *testing.B) benchStore {
		s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "crawl.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return benchStore{q: s, st: s}
	}},
	{"redis", func(b *testing.B) benchStore {
		addr := os.Getenv("MAGPIE_REDIS_ADDR")
		if addr == "" {
			b.Skip("MAGPIE_REDIS_ADDR is not set")
		}
		s, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: fmt.Sprintf("magpiebench-%x", rand.Uint64())})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = s.Clear(context.Background())
			s.Close()
		})
		return benchStore{q: s, st: s}
	}},
}

// BenchmarkQueueCrawl crawls a 500-page site (10 links a page, about 8 KiB)
// through a queue with 16 threads on each store of benchStores, the links
// followed either with e.Request.Visit or, as Colly programs do, with
// q.AddRequest from OnHTML; pages/s is reported.
func BenchmarkQueueCrawl(b *testing.B) {
	const pages = 500
	filler := strings.Repeat("<p>lorem ipsum dolor sit amet consectetur</p>\n", 160)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><body>", filler)
		for k := 1; k <= 10; k++ {
			fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, (i*7+k*k)%pages, k)
		}
		fmt.Fprint(w, "</body></html>")
	}))
	defer srv.Close()
	for _, bs := range benchStores {
		for _, mode := range []string{"Visit", "AddRequest"} {
			b.Run(bs.name+"/"+mode, func(b *testing.B) { benchQueueCrawl(b, srv.URL, bs.open, mode) })
		}
	}
}

func benchQueueCrawl(b *testing.B, site string, open func(*testing.B) benchStore, mode string) {
	var got atomic.Int64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s := open(b)
		b.StartTimer()
		q, err := queue.New(16, s.q)
		if err != nil {
			b.Fatal(err)
		}
		c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
		if s.st != nil {
			if err := c.SetStorage(s.st); err != nil {
				b.Fatal(err)
			}
		}
		if mode == "Visit" {
			c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		} else {
			c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
				r, err := e.Request.New("GET", e.Request.AbsoluteURL(e.Attr("href")), nil)
				if err == nil {
					_ = q.AddRequest(r)
				}
			})
		}
		c.OnResponse(func(*magpie.Response) { got.Add(1) })
		for i := range 10 {
			if err := q.AddURL(site + "/p/" + strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := q.Run(c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "pages/s")
}
