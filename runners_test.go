package magpie

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// goroutinesCreated is the process's count of goroutines created so far.
func goroutinesCreated(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("metric %s not supported", s[0].Name)
	}
	return s[0].Value.Uint64()
}

// fanServer serves "/" linking to pages /p/0 … /p/n-1, each a leaf with one
// paragraph. It answers HTTP/1.1 itself, one goroutine per connection,
// because net/http's server starts a goroutine per request (its background
// read), which would hide what the crawler starts.
func fanServer(t *testing.T, n int) string {
	t.Helper()
	var root strings.Builder
	for i := range n {
		fmt.Fprintf(&root, `<a href="/p/%d">%d</a>`, i, i)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{} // open connections, guarded by mu
	)
	accepting := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-accepting
		mu.Lock()
		for conn := range conns {
			conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	serve := func(conn net.Conn) {
		defer func() {
			mu.Lock()
			delete(conns, conn)
			mu.Unlock()
			conn.Close()
		}()
		br := bufio.NewReader(conn)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body := root.String()
			if req.URL.Path != "/" {
				body = fmt.Sprintf(`<p class="x">%s</p>`, req.URL.Path)
			}
			if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
				return
			}
		}
	}
	go func() {
		defer close(accepting)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[conn] = struct{}{}
			mu.Unlock()
			wg.Go(func() { serve(conn) })
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestRunnersPerCrawl: a crawl of many pages whose callbacks run in every
// stage (request, page, item pipeline) starts a number of goroutines that
// follows its workers, not its pages: the callback runners take one call
// after another. A callback that panics does not cost its runner; one that
// calls runtime.Goexit costs one, which a new runner replaces. After Wait
// every runner has exited.
func TestRunnersPerCrawl(t *testing.T) {
	const pages, workers = 400, 4
	for _, async := range []bool{true, false} {
		t.Run("async="+strconv.FormatBool(async), func(t *testing.T) {
			u := fanServer(t, pages)
			before := goleak.IgnoreCurrent()
			c := NewCollector(IgnoreRobotsTxt(), Workers(workers), Async(async))
			var requests, paragraphs, items, panics, goexits atomic.Int64
			c.OnRequest(func(*Request) { requests.Add(1) })
			c.OnHTML("a[href]", func(e *HTMLElement) { e.Request.Visit(e.Attr("href")) })
			c.OnHTML("p.x", func(e *HTMLElement) {
				paragraphs.Add(1)
				switch e.Text {
				case "/p/7", "/p/70":
					panic("boom")
				case "/p/9":
					runtime.Goexit()
				}
			})
			c.OnResponse(func(r *Response) { r.Emit(r.Request.URL.Path) })
			c.Pipeline(func(_ context.Context, _ *Item) error { items.Add(1); return nil })
			c.OnError(func(_ *Response, err error) {
				if pe, ok := errors.AsType[*CallbackPanicError](err); ok {
					if errors.Is(pe, ErrCallbackGoexit) {
						goexits.Add(1)
					} else {
						panics.Add(1)
					}
				}
			})
			start := goroutinesCreated(t)
			if err := c.Visit(u + "/"); err != nil {
				t.Fatalf("Visit() error = %v", err)
			}
			c.Wait()
			created := goroutinesCreated(t) - start
			if got := requests.Load(); got != pages+1 {
				t.Errorf("OnRequest calls = %d, want %d", got, pages+1)
			}
			if got := paragraphs.Load(); got != pages {
				t.Errorf("OnHTML(p.x) calls = %d, want %d", got, pages)
			}
			if got := items.Load(); got != pages {
				t.Errorf("items = %d, want %d (none from the page cut short by Goexit)", got, pages)
			}
			if p, g := panics.Load(), goexits.Load(); p != 2 || g != 1 {
				t.Errorf("OnError heard %d panics and %d Goexits, want 2 and 1", p, g)
			}
			// Per crawl: the run's own goroutines, the scheduler's
			// workers, a runner per call running at once (and one for
			// the runner Goexit ended), connections on both sides. Two
			// goroutines a page (fetch and analysis) would be 800.
			t.Logf("created %d", created)
			if limit := uint64(pages / 4); created > limit {
				t.Errorf("crawl of %d pages created %d goroutines, want at most %d", pages, created, limit)
			}
			c.shared.backend.get().CloseIdleConnections()
			if err := goleak.Find(before); err != nil {
				t.Errorf("goroutines left after Wait: %v", err)
			}
		})
	}
}

// TestStuckRunnerWrittenOff: a runner stuck in a callback is given up when
// the run stops (Stop returns the *CallbackStuckError, OnError hears of it
// on another runner), the other pages' callbacks ran, and the stuck runner
// exits as soon as the callback returns; the collector crawls again after.
func TestStuckRunnerWrittenOff(t *testing.T) {
	const pages = 40
	u := fanServer(t, pages)
	before := goleak.IgnoreCurrent()
	entered := make(chan struct{}, 1)
	release, others := make(chan struct{}), make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	c := NewCollector(IgnoreRobotsTxt(), Workers(2), Async(true), StopGrace(100*time.Millisecond))
	var paragraphs, stuckErrs atomic.Int64
	c.OnHTML("a[href]", func(e *HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnHTML("p.x", func(e *HTMLElement) {
		if e.Text == "/p/3" {
			blockInCallback(entered, release)
			return
		}
		if paragraphs.Add(1) == pages-1 {
			close(others)
		}
	})
	c.OnError(func(_ *Response, err error) {
		if errors.Is(err, ErrCallbackStuck) {
			stuckErrs.Add(1)
		}
	})
	if err := c.Visit(u + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	// The other pages go on while the callback is stuck.
	<-entered
	<-others
	var err error
	within(t, "Stop", func() { err = c.Stop() })
	checkStuck(t, err, "OnHTML", "p.x", u+"/p/3")
	if got := paragraphs.Load(); got != pages-1 {
		t.Errorf("OnHTML(p.x) ran for %d pages, want %d", got, pages-1)
	}
	if got := stuckErrs.Load(); got != 1 {
		t.Errorf("OnError heard of %d stuck callbacks, want 1", got)
	}
	c.shared.backend.get().CloseIdleConnections()
	if err := goleak.Find(stuckLeakOptions(before)...); err != nil {
		t.Errorf("goroutines left besides the stuck runner: %v", err)
	}
	close(release)
	released = true
	if err := goleak.Find(before); err != nil {
		t.Errorf("the written-off runner did not exit when its callback returned: %v", err)
	}
	c.Async = false
	if err := c.Visit(u + "/q"); err != nil {
		t.Errorf("Visit after Stop error = %v", err)
	}
	if got := paragraphs.Load(); got != pages {
		t.Errorf("OnHTML(p.x) ran for %d pages after a new Visit, want %d", got, pages)
	}
}

// BenchmarkGuard is what a stage call that runs user code pays to be
// guarded (see run.guard): the hand-off to a runner and back, with nothing
// to run.
func BenchmarkGuard(b *testing.B) {
	c := NewCollector()
	r := newGuardBenchRun(c)
	req := &Request{}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.guard(req, "engine", func() { n++ }); !ok {
			b.Fatal("call abandoned")
		}
	}
	if n != b.N {
		b.Fatalf("ran %d calls, want %d", n, b.N)
	}
	stopGuardBenchRun(r)
}

// newGuardBenchRun is a run with nothing but its callback runners.
func newGuardBenchRun(c *Collector) *run {
	r := &run{c: c, cfg: c.snapshot()}
	r.runnersQuit = make(chan struct{})
	return r
}

func stopGuardBenchRun(r *run) { r.closeRunners() }
