package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// ownRedis is a redis-server process the test started, without
// persistence, on a loopback port of its own.
type ownRedis struct {
	bin, addr, dir string
	cmd            *exec.Cmd
}

// startOwnRedis starts redis-server on a free port of 127.0.0.1. Without
// the binary the test skips locally and fails in CI (MAGPIE_REDIS_ADDR or
// CI set), as the other Redis tests do.
func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("MAGPIE_REDIS_ADDR") != "" || os.Getenv("CI") != "" {
			t.Fatalf("redis-server required: %v", err)
		}
		t.Skip("redis-server not found: install it to run the Redis restart test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := &ownRedis{bin: bin, addr: addr, dir: t.TempDir()}
	r.start(t)
	t.Cleanup(r.kill)
	return r
}

// start runs the server, empty, and waits until it answers.
func (r *ownRedis) start(t *testing.T) {
	t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.cmd = exec.Command(r.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	defer c.Close()
	if !eventually(t, 30*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil }) {
		t.Fatalf("redis-server on %s did not answer within 30s", r.addr)
	}
}

// kill SIGKILLs the server, as a crash or an OOM kill would, and waits for it.
func (r *ownRedis) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// Redis restarted without persistence in the middle of a queue crawl: the
// run notices that the store lost its contents and returns an error
// wrapping storage.ErrStoreReset. (It used to return nil with most pages
// never fetched, its acknowledgements refused as unknown leases, or never
// return, retrying a NOGROUP error for ever.)
func TestRunQueueRedisRestartedEmpty(t *testing.T) {
	const pages, before = 800, 100
	srv := startOwnRedis(t)
	restarted := make(chan struct{})
	reached := make(chan struct{})
	var mu sync.Mutex
	fetched := 0
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || i < 0 || i >= pages {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		fetched++
		n := fetched
		mu.Unlock()
		if n == before {
			close(reached)
		}
		if n > before {
			// Pages in flight while Redis restarts: their entries are
			// leased from the server that is about to lose them.
			select {
			case <-restarted:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body>page %d", i)
		for _, j := range []int{2*i + 1, 2*i + 2} {
			if j < pages {
				fmt.Fprintf(w, ` <a href="/p/%d">%d</a>`, j, j)
			}
		}
		fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(site.Close)

	st, err := New(Options{Addr: srv.addr, Prefix: randomPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	if err := c.SetStorage(st); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	q, err := queue.New(4, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(site.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Run(c) }()

	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("Run returned %v before the restart", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the crawl did not reach the restart point within 2 minutes")
	}
	srv.kill()
	srv.start(t)
	close(restarted)

	select {
	case err := <-done:
		if !errors.Is(err, storage.ErrStoreReset) {
			t.Fatalf("Run() error = %v, want one wrapping storage.ErrStoreReset", err)
		}
		t.Logf("Run() error = %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return within 2 minutes of the restart")
	}
}

// CheckReset tells a wiped crawl from an empty one, and a Store that
// cleared the crawl itself takes the new epoch.
func TestCheckReset(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := t.Context()
	if err := s.CheckReset(ctx); err != nil {
		t.Fatalf("CheckReset() on a fresh crawl = %v, want nil", err)
	}
	other, err := New(Options{Addr: redisAddr(t), Prefix: s.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.CheckReset(ctx); err != nil {
		t.Fatalf("CheckReset() of a second Store on the prefix = %v, want nil", err)
	}
	if err := s.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReset(ctx); err != nil {
		t.Errorf("CheckReset() after its own Clear = %v, want nil", err)
	}
	if err := other.CheckReset(ctx); !errors.Is(err, storage.ErrStoreReset) {
		t.Errorf("CheckReset() of another Store after Clear = %v, want ErrStoreReset", err)
	}
	// The keys vanish as in a server restarted empty (not FLUSHDB: the
	// server may be shared with other tests).
	if err := deleteByPattern(ctx, s.rdb, s.prefix+":*"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckReset(ctx); !errors.Is(err, storage.ErrStoreReset) {
		t.Errorf("CheckReset() after the keys are gone = %v, want ErrStoreReset", err)
	}
	// NOGROUP from an unused queue is nothing pending, not a reset.
	fresh := newTestStore(t, Options{})
	if err := fresh.ReleaseUnheld(ctx, nil); err != nil {
		t.Errorf("ReleaseUnheld() on a queue never used = %v, want nil", err)
	}
}

// A partitioned frontier keeps an epoch per partition, under its hash tag:
// losing one partition's keys (on a cluster, one master that came back
// empty) is a reset, noticed by the crawl's Store and by the partition's
// own pending-entry reads.
func TestCheckResetPartition(t *testing.T) {
	s := newTestStore(t, Options{Partitions: 3})
	ctx := t.Context()
	if err := s.CheckReset(ctx); err != nil {
		t.Fatalf("CheckReset() on a fresh partitioned crawl = %v, want nil", err)
	}
	other, err := New(Options{Addr: redisAddr(t), Prefix: s.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.CheckReset(ctx); err != nil {
		t.Fatalf("CheckReset() of a second Store adopting the partitions = %v, want nil", err)
	}
	lost := s.parts[1]
	if err := s.rdb.Del(ctx, lost.key("epoch")).Err(); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*Store{"crawl's Store": s, "second Store": other, "partition": lost} {
		if err := st.CheckReset(ctx); !errors.Is(err, storage.ErrStoreReset) {
			t.Errorf("%s: CheckReset() after one partition's keys are gone = %v, want ErrStoreReset", name, err)
		}
	}
	if err := s.parts[0].CheckReset(ctx); err != nil {
		t.Errorf("CheckReset() of an intact partition = %v, want nil", err)
	}
}
