package magpie

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/redisstore"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// hostQueueStores opens each store that leases by host, for tests of a
// queue run over storage.HostQueue.
func hostQueueStores() map[string]func(t *testing.T, path string) storage.HostQueue {
	return map[string]func(t *testing.T, path string) storage.HostQueue{
		// The memory queue forgets nothing on "reopen": path names one
		// queue, so a test's second open gets the first's entries.
		"memory": memoryHostQueue(),
		"sqlite": func(t *testing.T, path string) storage.HostQueue {
			if path == "" {
				path = filepath.Join(t.TempDir(), "q.db")
			}
			st, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"redis":         redisHostQueue(false),
		"redis-cluster": redisHostQueue(true),
	}
}

// redisHostQueue opens a redisstore Store on the server of
// MAGPIE_REDIS_ADDR (cluster: the Redis Cluster of
// MAGPIE_REDIS_CLUSTER_ADDRS, as .ci/redis.sh starts it), skipping the
// test when it is not set (failing in CI). A path names a crawl: the same
// path opens the same keys again; "" opens new ones. The keys are deleted
// at the test's end.
func redisHostQueue(cluster bool) func(t *testing.T, path string) storage.HostQueue {
	var mu sync.Mutex
	prefixes := map[string]string{}
	return func(t *testing.T, path string) storage.HostQueue {
		env := "MAGPIE_REDIS_ADDR"
		if cluster {
			env = "MAGPIE_REDIS_CLUSTER_ADDRS"
		}
		addr := os.Getenv(env)
		if addr == "" {
			if os.Getenv("CI") != "" {
				t.Fatalf("Redis required in CI: set %s", env)
			}
			t.Skipf("%s is not set: export it (a redis-server on 127.0.0.1; for the cluster, see .ci/redis.sh) to run the queue run over redisstore", env)
		}
		opts := redisstore.Options{Addr: addr}
		if cluster {
			opts = redisstore.Options{ClusterAddrs: strings.Split(addr, ",")}
		}
		mu.Lock()
		prefix, ok := prefixes[path]
		if !ok || path == "" {
			prefix = fmt.Sprintf("queue-hosts-%d", rand.Uint64())
			prefixes[path] = prefix
		}
		mu.Unlock()
		opts.Prefix = prefix
		if !ok || path == "" {
			t.Cleanup(func() {
				if s, err := redisstore.New(opts); err == nil {
					_ = s.Clear(context.Background())
					s.Close()
				}
			})
		}
		st, err := redisstore.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
}

// pushHosted pushes a GET of u to q with its host and priority, as a queue
// run pushes its links.
func pushHosted(t *testing.T, q storage.HostQueue, u string, priority int) {
	t.Helper()
	r := &Request{URL: mustParse(t, u), Method: http.MethodGet, Priority: priority}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := q.PushHosted(t.Context(), storage.HostEntry{Host: r.URL.Host, Priority: priority, Data: b}); err != nil {
		t.Fatal(err)
	}
}

// TestRunQueueHostsLeaseWhatCanStart: a host that allows one request at a
// time is stuck on its first page, its other pages first in the queue; 40
// other hosts come after them. Over a HostQueue the run leases 2 entries of
// the stuck host (one in flight, one next) and no more, and every other
// host is started meanwhile, with no look-ahead to tune.
func TestRunQueueHostsLeaseWhatCanStart(t *testing.T) {
	for name, open := range hostQueueStores() {
		t.Run(name, func(t *testing.T) {
			slow := newHostServer(t, true, nil)
			q := open(t, "")
			const slowPages = 8
			for i := range slowPages {
				pushHosted(t, q, fmt.Sprintf("%s/slow/%d", slow.URL, i), 0)
			}
			others := make([]*hostServer, 40)
			for i := range others {
				others[i] = newHostServer(t, false, nil)
				pushHosted(t, q, fmt.Sprintf("%s/other/%d", others[i].URL, i), 0)
			}
			c := NewCollector(IgnoreRobotsTxt())
			if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- c.RunQueue(t.Context(), q, 2) }()
			deadline := time.After(30 * time.Second)
			for i, o := range others {
				select {
				case <-o.first:
				case <-deadline:
					close(slow.hold)
					<-done
					t.Fatalf("host %d was not requested while the slow host was stuck", i)
				}
			}
			// The others are done or finishing: wait until only the slow
			// host's entries are leased, then none of its pending ones may be.
			var l storage.QueueLen
			for {
				var err error
				if l, err = q.Len(t.Context()); err != nil {
					t.Fatal(err)
				}
				if l.Leased <= 2 || !waitTick(t, deadline) {
					break
				}
			}
			close(slow.hold)
			if l.Leased != 2 || l.Ready != slowPages-2 {
				t.Errorf("while the slow host was stuck: %+v, want 2 of its entries leased and %d ready", l, slowPages-2)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := len(slow.counts()); got != slowPages {
				t.Errorf("slow host: %d pages fetched, want %d", got, slowPages)
			}
		})
	}
}

// waitTick waits a little for a condition polled by the caller, and
// reports false once deadline has passed.
func waitTick(t *testing.T, deadline <-chan time.Time) bool {
	t.Helper()
	select {
	case <-deadline:
		return false
	case <-time.After(5 * time.Millisecond):
		return true
	}
}

// startsServer records the time and path of every request it gets.
type startsServer struct {
	*httptest.Server
	mu     sync.Mutex
	starts []time.Time
	paths  []string
}

func newStartsServer(t *testing.T, body func(path string) string) *startsServer {
	s := &startsServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.starts = append(s.starts, time.Now())
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if body != nil {
			fmt.Fprint(w, body(r.URL.Path))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *startsServer) got() ([]time.Time, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.starts), slices.Clone(s.paths)
}

// TestRunQueueHostsReadyTimeSurvivesRestart: a run fetches one page of a
// host with a Delay and stops (MaxRequests); the next run, a new collector
// on the same file, must not fetch the host's next page before the Delay
// has passed since the first, though its own gate never saw the host.
func TestRunQueueHostsReadyTimeSurvivesRestart(t *testing.T) {
	const delay = 1500 * time.Millisecond
	for name, open := range hostQueueStores() {
		t.Run(name, func(t *testing.T) {
			srv := newStartsServer(t, nil)
			path := filepath.Join(t.TempDir(), "q.db")
			q := open(t, path)
			pushHosted(t, q, srv.URL+"/a", 0)
			pushHosted(t, q, srv.URL+"/b", 0)
			run := func(opts ...CollectorOption) {
				c := NewCollector(append(opts, IgnoreRobotsTxt())...)
				if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay}); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				if err := c.RunQueue(ctx, q, 1); err != nil {
					t.Fatal(err)
				}
			}
			run(MaxRequests(1))
			head, err := q.Head(t.Context(), 10)
			if err != nil {
				t.Fatal(err)
			}
			starts, _ := srv.got()
			if len(starts) != 1 || len(head) != 1 {
				t.Fatalf("after the first run: %d fetches, head %+v; want 1 fetch and 1 entry left", len(starts), head)
			}
			if want := starts[0].Add(delay); head[0].HostReady.Before(want.Add(-100 * time.Millisecond)) {
				t.Errorf("stored ready time = first start +%v, want about +%v", head[0].HostReady.Sub(starts[0]), delay)
			}
			run()
			starts, paths := srv.got()
			if len(starts) != 2 {
				t.Fatalf("fetches = %v, want /a then /b", paths)
			}
			if gap := starts[1].Sub(starts[0]); gap < delay-50*time.Millisecond {
				t.Errorf("the resumed run fetched the host %v after the first run did, want at least the Delay, %v", gap, delay)
			}
		})
	}
}

// TestRunQueueHostsPriority: one host, one request at a time; its pages
// are fetched highest priority first, FIFO among equals, and the links a
// page finds are ranked by the Prioritize hook against what is queued.
func TestRunQueueHostsPriority(t *testing.T) {
	for name, open := range hostQueueStores() {
		t.Run(name, func(t *testing.T) {
			srv := newStartsServer(t, func(path string) string {
				if path == "/seed" {
					return `<a href="/found/low">x</a><a href="/found/top">x</a>`
				}
				return ""
			})
			q := open(t, "")
			pushHosted(t, q, srv.URL+"/seed", 100)
			pushHosted(t, q, srv.URL+"/p1", 1)
			pushHosted(t, q, srv.URL+"/p5a", 5)
			pushHosted(t, q, srv.URL+"/p5b", 5)
			pushHosted(t, q, srv.URL+"/p9", 9)
			c := NewCollector(IgnoreRobotsTxt(), Prioritize(func(r *Request) int {
				switch r.URL.Path {
				case "/found/top":
					return 50
				case "/found/low":
					return -1
				}
				return r.Priority
			}))
			if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
				t.Fatal(err)
			}
			c.OnHTML("a[href]", func(e *HTMLElement) { e.Request.Visit(e.Attr("href")) })
			if err := c.RunQueue(t.Context(), q, 1); err != nil {
				t.Fatal(err)
			}
			_, paths := srv.got()
			// The seed and the next best entry are leased together (2 per
			// host); the seed's links come after that lease.
			want := []string{"/seed", "/p9", "/found/top", "/p5a", "/p5b", "/p1", "/found/low"}
			if !slices.Equal(paths, want) {
				t.Errorf("fetch order = %v, want %v", paths, want)
			}
		})
	}
}

// memoryHostQueue opens in-memory queues by path: the same path, the same
// queue, as a store reopened from its file.
func memoryHostQueue() func(t *testing.T, path string) storage.HostQueue {
	var mu sync.Mutex
	queues := map[string]*storage.MemoryQueue{}
	return func(t *testing.T, path string) storage.HostQueue {
		mu.Lock()
		defer mu.Unlock()
		if q := queues[path]; q != nil && path != "" {
			return q
		}
		q := storage.NewMemoryQueue(0)
		queues[path] = q
		return q
	}
}

// TestRunQueueHostsBestAcrossHosts: 30 hosts of one page each, ranked in
// no order of their push; a queue run stopped by MaxRequests(10) has
// fetched exactly the 10 best.
func TestRunQueueHostsBestAcrossHosts(t *testing.T) {
	for name, open := range hostQueueStores() {
		t.Run(name, func(t *testing.T) {
			q := open(t, "")
			var mu sync.Mutex
			got := map[int]bool{}
			const hosts = 30
			for i := range hosts {
				prio := (i * 7) % hosts // a permutation of 0..29
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					got[prio] = true
					mu.Unlock()
				}))
				t.Cleanup(srv.Close)
				pushHosted(t, q, srv.URL+"/", prio)
			}
			c := NewCollector(IgnoreRobotsTxt(), MaxRequests(10))
			if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
				t.Fatal(err)
			}
			if err := c.RunQueue(t.Context(), q, 1); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for p := hosts - 10; p < hosts; p++ {
				if !got[p] {
					t.Errorf("priority %d not fetched; fetched %v, want the 10 best (20-29)", p, got)
				}
			}
			if len(got) != 10 {
				t.Errorf("%d pages fetched, want 10", len(got))
			}
		})
	}
}

// leaseLog is a memory queue that records each LeaseHosts call: when it
// began and ended, and whether it came back short.
type leaseLog struct {
	*storage.MemoryQueue
	mu    sync.Mutex
	calls []leaseCall
}

type leaseCall struct {
	start, end time.Time
	short      bool
}

func (q *leaseLog) LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	start := time.Now()
	es, err := q.MemoryQueue.LeaseHosts(ctx, now, n, perHost, ttl)
	q.mu.Lock()
	q.calls = append(q.calls, leaseCall{start: start, end: time.Now(), short: len(es) < n})
	q.mu.Unlock()
	return es, err
}

// TestRunQueueHostsLeasePaced: a run over a HostQueue whose host waits
// out a Delay longer than hostLead does not ask the store again sooner
// than leasePace after a lease that came back short, however often it is
// woken; and the crawl still fetches every page.
func TestRunQueueHostsLeasePaced(t *testing.T) {
	const pages = 4
	srv := newStartsServer(t, func(path string) string {
		if path != "/" {
			return ""
		}
		var b strings.Builder
		for i := range pages - 1 {
			fmt.Fprintf(&b, `<a href="/p/%d">p</a>`, i)
		}
		return b.String()
	})
	q := &leaseLog{MemoryQueue: storage.NewMemoryQueue(0)}
	pushHosted(t, q, srv.URL+"/", 0)
	c := NewCollector(IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: hostLead + 100*time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.RunQueue(ctx, q, 4); err != nil {
		t.Fatal(err)
	}
	if starts, paths := srv.got(); len(starts) != pages {
		t.Errorf("fetched %d pages (%v), want %d", len(starts), paths, pages)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	shorts := 0
	for i := 1; i < len(q.calls); i++ {
		prev := q.calls[i-1]
		if !prev.short {
			continue
		}
		shorts++
		if gap := q.calls[i].start.Sub(prev.end); gap < leasePace {
			t.Errorf("lease %d began %v after lease %d came back short, want at least %v", i, gap, i-1, leasePace)
		}
	}
	if shorts == 0 {
		t.Errorf("no lease of %d came back short: the test shows nothing", len(q.calls))
	}
}
