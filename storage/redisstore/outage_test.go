package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/redis/go-redis/v9"
)

// cutProxy forwards TCP connections on 127.0.0.1 to a target. cut closes
// every connection and the listener, so that new connections are refused,
// until restore listens again on the same address: a Redis outage as the
// client sees it.
type cutProxy struct {
	target, addr string
	// wg counts the accept loops and the copying goroutines.
	wg sync.WaitGroup
	// mu guards ln and conns.
	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.handle(c)
		}
	}()
}

// track registers c, or closes it and reports false when the proxy is cut.
func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) handle(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c) || !p.track(up) {
		c.Close()
		up.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	p.wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
}

// cut closes the listener and every connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the proxy's address.
func (p *cutProxy) restore() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// lockedWriter makes a writer safe for the logger's concurrent writes.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestCrawlSurvivesRedisOutage cuts Redis off for about two seconds in the
// middle of a queue crawl that keeps its queue and visited set in Redis:
// the crawl pauses, resumes by itself, fetches every page, and OnError
// hears of the outage.
func TestCrawlSurvivesRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a Redis outage for two seconds")
	}
	const (
		pages   = 300
		threads = 4
		cutAt   = pages / 3
		outage  = 2 * time.Second
	)
	var mu sync.Mutex
	counts := map[int]int{}
	fetched := 0
	cutNow := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || i < 0 || i >= pages {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		counts[i]++
		fetched++
		if fetched == cutAt {
			close(cutNow)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><a href="/p/0">home</a>`)
		for _, j := range []int{2*i + 1, 2*i + 2} {
			if j < pages {
				fmt.Fprintf(w, ` <a href="/p/%d">%d</a>`, j, j)
			}
		}
		fmt.Fprint(w, "</body></html>")
	}))
	defer srv.Close()

	direct := newTestStore(t, Options{})
	proxy := startCutProxy(t, redisAddr(t))
	// No retries inside go-redis: the outage reaches the store's caller
	// instead of being absorbed (or half-absorbed) by the client.
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr, MaxRetries: -1})
	defer rdb.Close()
	s, err := NewFromClient(rdb, Options{Prefix: direct.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	logs := &lockedWriter{}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt(),
		magpie.Logger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err := c.SetStorage(s); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var errMu sync.Mutex
	storageErrs := map[string]int{}
	c.OnError(func(_ *magpie.Response, err error) {
		var se *magpie.StorageError
		if errors.As(err, &se) && errors.Is(err, magpie.ErrStorageUnavailable) {
			errMu.Lock()
			storageErrs[se.Op]++
			errMu.Unlock()
		}
	})
	q, err := queue.New(threads, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(srv.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}

	// The outage: cut when a third of the pages are fetched, restore after
	// outage. The goroutine is waited for before the test ends.
	outageDone := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	go func() {
		select {
		case <-cutNow:
		case <-ctx.Done():
			outageDone <- errors.New("the crawl never reached the cut")
			return
		}
		proxy.cut()
		t := time.NewTimer(outage)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		outageDone <- proxy.restore()
	}()

	runErr := q.RunContext(ctx, c)
	if err := <-outageDone; err != nil {
		t.Fatalf("outage: %v", err)
	}
	if runErr != nil {
		t.Fatalf("Run() error = %v, want nil\nlogs:\n%s", runErr, logs)
	}

	mu.Lock()
	defer mu.Unlock()
	var dups []int
	for i := range pages {
		switch n := counts[i]; {
		case n == 0:
			t.Errorf("page %d never fetched", i)
		case n > 1:
			dups = append(dups, i)
		}
	}
	// Only requests in flight at the cut may run twice: their parents'
	// entries are released when the links they found cannot be stored.
	if len(dups) > 2*threads {
		t.Errorf("pages fetched more than once: %v, want at most %d (those in flight at the cut)", dups, 2*threads)
	}
	errMu.Lock()
	defer errMu.Unlock()
	if len(storageErrs) == 0 {
		t.Errorf("OnError saw no StorageError during the outage")
	}
	for op, n := range storageErrs {
		if n != 1 {
			t.Errorf("OnError saw %d StorageErrors for %q, want one for the outage", n, op)
		}
	}
	out := logs.String()
	if !strings.Contains(out, `msg="storage failing; retrying"`) || !strings.Contains(out, `msg="storage recovered"`) {
		t.Errorf("logs lack the outage's Warn and the recovery's Info:\n%s", out)
	}
	t.Logf("outage of %v: storage errors per op %v, pages fetched twice %v", outage, storageErrs, dups)
	if l, err := direct.Len(t.Context()); err != nil || l.Total() != 0 {
		t.Errorf("queue after the crawl: Len() = %+v, %v, want empty", l, err)
	}
}
