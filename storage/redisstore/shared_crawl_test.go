package redisstore

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

// politeDelay is the shared crawl's LimitRule.Delay.
const politeDelay = 20 * time.Millisecond

// TestHelperPoliteCrawler is a child process of TestSharedPoliteness: it
// crawls with the Store on prefix MAGPIE_POLITE_PREFIX, one request at a
// time per host with politeDelay between starts, through SharedLimits when
// MAGPIE_POLITE_SHARED is 1. It does nothing in a normal test run.
func TestHelperPoliteCrawler(t *testing.T) {
	prefix := os.Getenv("MAGPIE_POLITE_PREFIX")
	if prefix == "" {
		t.Skip("helper process for TestSharedPoliteness")
	}
	o := Options{Prefix: prefix}
	if addrs := os.Getenv("MAGPIE_POLITE_CLUSTER"); addrs != "" {
		o.ClusterAddrs = strings.Split(addrs, ",")
	} else {
		o.Addr = redisAddr(t)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := []magpie.CollectorOption{magpie.UserAgent(os.Getenv("MAGPIE_POLITE_NAME")), magpie.IgnoreRobotsTxt()}
	if os.Getenv("MAGPIE_POLITE_SHARED") == "1" {
		hl := s.HostLimiter(0)
		// Report every grant to the parent, on the Redis server's clock.
		var mu sync.Mutex
		hl.OnGrant(func(host string, at time.Time) {
			mu.Lock()
			fmt.Printf("GRANT %s %d\n", host, at.UnixMicro())
			mu.Unlock()
		})
		opts = append(opts, magpie.SharedLimits(hl))
	}
	c := magpie.NewCollector(opts...)
	if err := c.SetStorage(s); err != nil {
		t.Fatal(err)
	}
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 1, Delay: politeDelay}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	// The moment the request goes on the wire, on the machine's clock that
	// every process shares: the servers compare it with the arrival.
	c.OnRequestHeaders(func(r *magpie.Request) { r.Headers.Set("X-Sent", strconv.FormatInt(time.Now().UnixNano(), 10)) })
	var qs queue.Storage = s
	if os.Getenv("MAGPIE_POLITE_SHARED") != "1" {
		qs = fifoQueue{s}
	}
	q, err := queue.New(4, qs)
	if err != nil {
		t.Fatal(err)
	}
	var calls callCounter
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// Counted where they go out: a node's client (durable pushes and
		// acknowledgements use one directly).
		cc.OnNewNode(func(c *redis.Client) { c.AddHook(&calls) })
		if err := cc.ForEachShard(context.Background(), func(_ context.Context, c *redis.Client) error {
			c.AddHook(&calls)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	} else {
		s.rdb.AddHook(&calls)
	}
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
	// Every call this process made to Redis, for the parent's figures.
	fmt.Printf("CALLS %d %d\n", calls.cmds.Load(), calls.pipes.Load())
}

// fifoQueue shows a Store as a plain storage.Queue, not a HostQueue: a
// queue run over it leases in push order and stores no hosts' next starts,
// so each process keeps the Delay alone. (Over a HostQueue the run stores
// each host's next start, and every process waits for it: politeness
// shared through the queue, which TestSharedPoliteness's crawl without
// SharedLimits must not have.)
type fifoQueue struct{ storage.Queue }

// callCounter is a go-redis hook counting the round trips a client makes:
// single commands (a script is one) and pipelines (on a cluster, counted
// per node they go to).
type callCounter struct{ cmds, pipes atomic.Int64 }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipes.Add(1)
		return next(ctx, cmds)
	}
}

// politeSite is pages pages spread over three servers (page i on server
// i%3); page i links to pages 2i+1 and 2i+2, wherever they live, and back
// to page 0. Each server records when every page request arrived, when the
// crawler sent it (its X-Sent header) and how many were in flight at once.
type politeSite struct {
	pages int
	urls  []string // server base URLs, fixed before the servers start
	srvs  []*httptest.Server

	// mu guards everything below.
	mu       sync.Mutex
	counts   map[int]int
	arrivals [][]time.Time // by server
	sent     [][]time.Time // by server
	inflight []int
	maxIn    []int
	who      [][]string
	// calls and pipes add up the crawler processes' Redis calls (crawlOn).
	calls, pipes int64
	// total counts page fetches; reached, when set, is closed at the
	// reachAt-th.
	total   int
	reachAt int
	reached chan struct{}
}

func newPoliteSite(t *testing.T, pages int) *politeSite {
	t.Helper()
	return newPoliteSiteN(t, pages, 3)
}

// newPoliteSiteN is newPoliteSite over n servers (page i on server i%n).
func newPoliteSiteN(t *testing.T, pages, n int) *politeSite {
	t.Helper()
	s := &politeSite{pages: pages, counts: map[int]int{}, arrivals: make([][]time.Time, n),
		sent: make([][]time.Time, n), who: make([][]string, n),
		inflight: make([]int, n), maxIn: make([]int, n)}
	for k := range n {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.serve(k, w, r)
		}))
		s.srvs = append(s.srvs, srv)
		s.urls = append(s.urls, "http://"+srv.Listener.Addr().String())
		t.Cleanup(srv.Close)
	}
	for _, srv := range s.srvs {
		srv.Start()
	}
	return s
}

func (s *politeSite) url(i int) string { return fmt.Sprintf("%s/p/%d", s.urls[i%len(s.urls)], i) }

func (s *politeSite) serve(k int, w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
	if err != nil || i < 0 || i >= s.pages || i%len(s.urls) != k {
		http.NotFound(w, r) // robots.txt among others: not a page, not counted
		return
	}
	s.mu.Lock()
	s.arrivals[k] = append(s.arrivals[k], time.Now())
	s.who[k] = append(s.who[k], r.UserAgent())
	if ns, err := strconv.ParseInt(r.Header.Get("X-Sent"), 10, 64); err == nil {
		s.sent[k] = append(s.sent[k], time.Unix(0, ns))
	}
	s.counts[i]++
	s.total++
	if s.reached != nil && s.total == s.reachAt {
		close(s.reached)
	}
	s.inflight[k]++
	s.maxIn[k] = max(s.maxIn[k], s.inflight[k])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight[k]--
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, `<html><body><a href="%s">home</a>`, s.url(0))
	for _, j := range []int{2*i + 1, 2*i + 2} {
		if j < s.pages {
			fmt.Fprintf(w, ` <a href="%s">%d</a>`, s.url(j), j)
		}
	}
	fmt.Fprint(w, "</body></html>")
}

// pct returns the p-th percentile of the sorted ds.
func pct(ds []time.Duration, p int) time.Duration { return ds[len(ds)*p/100] }

// gaps returns the sorted gaps between consecutive times of ts.
func gaps(ts []time.Time) []time.Duration {
	a := slices.Clone(ts)
	slices.SortFunc(a, func(x, y time.Time) int { return x.Compare(y) })
	var g []time.Duration
	for i := 1; i < len(a); i++ {
		g = append(g, a[i].Sub(a[i-1]))
	}
	slices.Sort(g)
	return g
}

// crawl runs three crawler processes on one fresh Redis crawl of the site,
// waits for them, and returns the starts the shared limiter granted, by
// host, in µs on the Redis server's clock (none without SharedLimits).
func (s *politeSite) crawl(t *testing.T, shared bool) map[string][]int64 {
	t.Helper()
	return s.crawlOn(t, newTestStore(t, Options{}), shared, nil)
}

// crawlOn is crawl on the crawl of st; the crawler processes get env too.
func (s *politeSite) crawlOn(t *testing.T, st *Store, shared bool, env []string) map[string][]int64 {
	t.Helper()
	q, err := queue.New(1, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(s.url(0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	const procs = 3
	errs := make(chan error, procs)
	outs := make([]*strings.Builder, procs)
	for p := range procs {
		// A crawl that hangs is killed, and reported, rather than left to
		// the test binary's timeout.
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperPoliteCrawler$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MAGPIE_POLITE_PREFIX="+st.prefix, fmt.Sprintf("MAGPIE_POLITE_NAME=proc%d", p),
			fmt.Sprintf("MAGPIE_POLITE_SHARED=%d", map[bool]int{false: 0, true: 1}[shared]))
		cmd.Env = append(cmd.Env, env...)
		out := &strings.Builder{}
		outs[p] = out
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
	grants := map[string][]int64{}
	for _, out := range outs {
		for line := range strings.SplitSeq(out.String(), "\n") {
			var host string
			var at int64
			if n, _ := fmt.Sscanf(line, "GRANT %s %d", &host, &at); n == 2 {
				grants[host] = append(grants[host], at)
			}
			var cmds, pipes int64
			if n, _ := fmt.Sscanf(line, "CALLS %d %d", &cmds, &pipes); n == 2 {
				s.calls += cmds
				s.pipes += pipes
			}
		}
	}
	return grants
}

// TestSharedPoliteness is the acceptance test of SharedLimits: three
// crawler processes share one Redis crawl of three hosts under
// LimitRule{DomainGlob: "*", Parallelism: 1, Delay: 20ms}. With
// SharedLimits every page is fetched once, no host ever has two requests in
// flight (measured by the servers), and the starts Redis granted for a host,
// across all three processes, are at least Delay apart on the Redis server's
// clock — the one clock all processes are spaced on. All three are exact.
//
// The gaps a server sees between arrivals carry both sides' scheduling
// jitter on top of that spacing: on a loaded machine (CI runs every package
// at once on 2 cores) one stall between grant and send, or between send and
// arrival, shortens one gap by milliseconds and lengthens the next by as
// much. Those gaps are logged (median, 5th percentile, minimum, and what
// caused the shortest), not asserted: they measure the machine, not magpie.
// Without SharedLimits the same crawl, smaller, over the queue as a plain
// FIFO (fifoQueue), has most arrival gaps far below Delay (asserted: at
// least 30% below Delay-5ms), since each process keeps the Delay alone.
func TestSharedPoliteness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts crawler processes")
	}
	redisAddr(t)
	t.Run("SharedLimits", func(t *testing.T) {
		site := newPoliteSite(t, 2100)
		begin := time.Now()
		grants := site.crawl(t, true)
		t.Logf("2100 pages over 3 hosts in %v", time.Since(begin).Round(time.Millisecond))
		site.mu.Lock()
		defer site.mu.Unlock()
		for i := range site.pages {
			if n := site.counts[i]; n != 1 {
				t.Errorf("page %d fetched %d times, want 1", i, n)
			}
		}
		if len(grants) != len(site.srvs) {
			t.Fatalf("grants for %d hosts, want %d", len(grants), len(site.srvs))
		}
		for host, at := range grants {
			slices.Sort(at)
			if len(at) != site.pages/3 {
				t.Errorf("host %s: %d starts granted, want %d (one per page)", host, len(at), site.pages/3)
			}
			shortest := time.Duration(1<<63 - 1)
			for i := 1; i < len(at); i++ {
				gap := time.Duration(at[i]-at[i-1]) * time.Microsecond
				shortest = min(shortest, gap)
				if gap < politeDelay {
					t.Errorf("host %s: starts %d and %d granted %v apart, want >= %v", host, i-1, i, gap, politeDelay)
				}
			}
			t.Logf("host %s: %d starts granted, shortest gap %v (Redis clock)", host, len(at), shortest)
		}
		for k := range site.srvs {
			arr, wire := gaps(site.arrivals[k]), gaps(site.sent[k])
			if len(arr) != site.pages/3-1 || len(wire) != len(arr) {
				t.Fatalf("host %d: %d arrival gaps and %d send gaps, want %d", k, len(arr), len(wire), site.pages/3-1)
			}
			short := 0
			for _, d := range arr {
				if d < politeDelay-5*time.Millisecond {
					short++
				}
			}
			t.Logf("host %d: start gaps sent min %v p5 %v, arrived min %v p5 %v median %v (%d below %v); most in flight %d",
				k, wire[0], pct(wire, 5), arr[0], pct(arr, 5), pct(arr, 50), short, politeDelay-5*time.Millisecond, site.maxIn[k])
			// Arrivals are recorded under mu, so in order: explain the
			// shortest gap by its two requests' send times.
			if a, sent := site.arrivals[k], site.sent[k]; len(a) > 1 {
				i := 1
				for j := 2; j < len(a); j++ {
					if a[j].Sub(a[j-1]) < a[i].Sub(a[i-1]) {
						i = j
					}
				}
				t.Logf("host %d: shortest arrival gap %v: %s then %s, sent %v apart, %v and %v from send to arrival",
					k, a[i].Sub(a[i-1]), site.who[k][i-1], site.who[k][i], sent[i].Sub(sent[i-1]), a[i-1].Sub(sent[i-1]), a[i].Sub(sent[i]))
			}
			if site.maxIn[k] > 1 {
				t.Errorf("host %d: %d requests in flight at once, want at most 1", k, site.maxIn[k])
			}
		}
	})
	t.Run("without SharedLimits", func(t *testing.T) {
		site := newPoliteSite(t, 300)
		if grants := site.crawl(t, false); len(grants) != 0 {
			t.Errorf("grants without SharedLimits: %d hosts, want none", len(grants))
		}
		site.mu.Lock()
		defer site.mu.Unlock()
		short, all := 0, 0
		for k := range site.srvs {
			for _, d := range gaps(site.arrivals[k]) {
				all++
				if d < politeDelay-5*time.Millisecond {
					short++
				}
			}
		}
		t.Logf("%d of %d arrival gaps below %v", short, all, politeDelay-5*time.Millisecond)
		if short < all*30/100 {
			t.Errorf("without SharedLimits %d of %d arrival gaps below %v, want at least 30%%: the test cannot tell the feature works", short, all, politeDelay-5*time.Millisecond)
		}
	})
}
