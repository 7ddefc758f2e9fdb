package redisstore

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// crawlPages is the size of the multi-process test's site: page i links to
// pages 2i+1 and 2i+2 and back to page 0, so the crawl from /p/0 reaches
// every page, and every page but the root is linked once more than needed.
const crawlPages = 600

// TestHelperRedisCrawler is a child process of TestMultiProcessCrawl: it
// crawls MAGPIE_CRAWL_SITE with the Store on prefix MAGPIE_CRAWL_PREFIX
// until the shared queue is empty. It does nothing in a normal test run.
func TestHelperRedisCrawler(t *testing.T) {
	prefix, site := os.Getenv("MAGPIE_CRAWL_PREFIX"), os.Getenv("MAGPIE_CRAWL_SITE")
	if prefix == "" || site == "" {
		t.Skip("helper process for TestMultiProcessCrawl")
	}
	s, err := New(Options{Addr: redisAddr(t), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := magpie.NewCollector(magpie.UserAgent(os.Getenv("MAGPIE_CRAWL_NAME")))
	if err := c.SetStorage(s); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.DOM.AttrOr("href", "")) })
	q, err := queue.New(4, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
}

// TestMultiProcessCrawl runs three crawler processes on one Redis crawl:
// every page is fetched exactly once, by whichever process leased it.
func TestMultiProcessCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts crawler processes")
	}
	var mu sync.Mutex
	counts := map[int]int{}
	byProc := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || i < 0 || i >= crawlPages {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		counts[i]++
		byProc[r.UserAgent()]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><a href="/p/0">home</a>`)
		for _, j := range []int{2*i + 1, 2*i + 2} {
			if j < crawlPages {
				fmt.Fprintf(w, ` <a href="/p/%d">%d</a>`, j, j)
			}
		}
		fmt.Fprint(w, "</body></html>")
	}))
	defer srv.Close()

	s := newTestStore(t, Options{})
	q, err := queue.New(1, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(srv.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}

	const procs = 3
	errs := make(chan error, procs)
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRedisCrawler$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MAGPIE_CRAWL_PREFIX="+s.prefix, "MAGPIE_CRAWL_SITE="+srv.URL,
			fmt.Sprintf("MAGPIE_CRAWL_NAME=proc%d", p))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, out)
			}
			errs <- err
		}()
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Errorf("crawler process error = %v", err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for i := range crawlPages {
		if n := counts[i]; n != 1 {
			t.Errorf("page %d fetched %d times, want 1", i, n)
		}
	}
	t.Logf("fetches per process: %v", byProc)
	if l, err := s.Len(t.Context()); err != nil || l.Total() != 0 {
		t.Errorf("queue after the crawl: Len() = %+v, %v, want empty", l, err)
	}
}
