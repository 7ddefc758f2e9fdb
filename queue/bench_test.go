package queue_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// BenchmarkQueueCrawl crawls a 500-page site (10 links a page, about 8 KiB)
// through a memory queue with 16 threads, the links followed either with
// e.Request.Visit or, as Colly programs do, with q.AddRequest from OnHTML;
// pages/s is reported.
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
	for _, mode := range []string{"Visit", "AddRequest"} {
		b.Run(mode, func(b *testing.B) {
			var got atomic.Int64
			b.ReportAllocs()
			for b.Loop() {
				q, err := queue.New(16, &queue.InMemoryQueueStorage{MaxSize: queue.DefaultMaxSize})
				if err != nil {
					b.Fatal(err)
				}
				c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
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
					if err := q.AddURL(srv.URL + "/p/" + strconv.Itoa(i)); err != nil {
						b.Fatal(err)
					}
				}
				if err := q.Run(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "pages/s")
		})
	}
}
