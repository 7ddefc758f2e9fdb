package magpie_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// TestStreamHTMLQueueCrawl crawls a site through a queue, links handed to
// q.AddURL as Colly programs do, with StreamHTML and without: every page is
// streamed, and the callbacks see the same links on the same pages.
func TestStreamHTMLQueueCrawl(t *testing.T) {
	const pages = 40
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || i < 0 || i >= pages {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><title>%d</title><ul><li><a href="/p/%d">next <b>%d</b></a><li><a href=/p/%d>far</a></ul>`+
			`<table><tr><td><p>cell <a href="p/%d">relative</a><td>x</table><p>end`, i, (i+1)%pages, i+1, i*7%pages, i/2)
	}))
	defer site.Close()
	crawl := func(opts ...magpie.CollectorOption) (map[string]bool, magpie.Stats) {
		c := magpie.NewCollector(opts...)
		q, err := queue.New(4, &queue.InMemoryQueueStorage{MaxSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string]bool{}
		c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
			u := e.Request.AbsoluteURL(e.Attr("href"))
			mu.Lock()
			seen[e.Request.URL.Path+" "+e.Text+" "+u] = true
			mu.Unlock()
			_ = q.AddURL(u)
		})
		if err := q.AddURL(site.URL + "/p/0"); err != nil {
			t.Fatal(err)
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		return seen, c.Stats()
	}
	parsed, pst := crawl()
	streamed, sst := crawl(magpie.StreamHTML())
	if pst.StatusCodes[200] != pages || sst.StatusCodes[200] != pages {
		t.Fatalf("pages fetched: parsed %d, streamed %d; want %d each", pst.StatusCodes[200], sst.StatusCodes[200], pages)
	}
	if sst.HTMLStreamed != pages || sst.HTMLParsedWhole != 0 || pst.HTMLStreamed != 0 {
		t.Errorf("streamed %d and parsed whole %d pages with StreamHTML (%d without); want %d, 0 (0)",
			sst.HTMLStreamed, sst.HTMLParsedWhole, pst.HTMLStreamed, pages)
	}
	if len(parsed) == 0 || !maps.Equal(parsed, streamed) {
		t.Errorf("the callbacks saw %d links streamed, %d parsed, or different ones", len(streamed), len(parsed))
	}
}
