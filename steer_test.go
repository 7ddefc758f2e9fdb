package magpie

import (
	"context"
	"errors"
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

// pauseSite is a site whose root links to pages /p/0 … /p/n-1, each held
// at the server until the test releases it: one value on release lets one
// request through, closing it lets all through. It counts the requests
// each path got, and tells each arrival on arrived.
type pauseSite struct {
	*httptest.Server
	release chan struct{}
	arrived chan string
	mu      sync.Mutex
	hits    map[string]int
}

func newPauseSite(t *testing.T, n int) *pauseSite {
	t.Helper()
	s := &pauseSite{release: make(chan struct{}), arrived: make(chan string, 4*n+8), hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		s.arrived <- r.URL.Path
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
			return
		}
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "<html><body>page</body></html>")
	}))
	t.Cleanup(s.Close)
	return s
}

// total is how many requests reached the server.
func (s *pauseSite) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.hits {
		n += v
	}
	return n
}

func (s *pauseSite) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.hits))
	for k, v := range s.hits {
		out[k] = v
	}
	return out
}

// waitFor receives from ch, failing the test after a deadline.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// pausedSignal makes c tell on the returned channel each time its engine
// starts waiting for Resume.
func pausedSignal(c *Collector) <-chan struct{} {
	ch := make(chan struct{}, 1)
	c.steer.pausedHook = func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return ch
}

// waitHeld waits until c's engine waits for Resume, failing the test if a
// request reaches s first.
func waitHeld(t *testing.T, held <-chan struct{}, s *pauseSite) {
	t.Helper()
	select {
	case <-held:
	case p := <-s.arrived:
		t.Fatalf("%s was requested while paused", p)
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the engine to wait for Resume")
	}
}

// checkEveryPageOnce reports a page of s fetched other than once.
func checkEveryPageOnce(t *testing.T, s *pauseSite, n int, root bool) {
	t.Helper()
	got := s.counts()
	want := n
	if root {
		want++
		if got["/"] != 1 {
			t.Errorf("/ fetched %d times, want 1", got["/"])
		}
	}
	if len(got) != want {
		t.Errorf("%d paths fetched, want %d: %v", len(got), want, got)
	}
	for i := range n {
		if p := fmt.Sprintf("/p/%d", i); got[p] != 1 {
			t.Errorf("%s fetched %d times, want 1", p, got[p])
		}
	}
}

// TestPauseHoldsRequestsAtServer: with two requests in flight (held at the
// server), Pause lets them finish (their callbacks run) and starts no other;
// Wait does not return while paused; Resume starts the rest and the crawl
// fetches every page once.
func TestPauseHoldsRequestsAtServer(t *testing.T) {
	const n = 10
	s := newPauseSite(t, n)
	c := NewCollector(Async(), IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 2}); err != nil {
		t.Fatal(err)
	}
	held := pausedSignal(c)
	scraped := make(chan string, n+1)
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnScraped(func(r *Response) { scraped <- r.Request.URL.Path })
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s.arrived, "the root")
	waitFor(t, scraped, "the root's callbacks")
	waitFor(t, s.arrived, "the first page")
	waitFor(t, s.arrived, "the second page")
	c.Pause()
	c.Pause() // idempotent
	if !c.Paused() || !c.Stats().Paused {
		t.Fatal("Paused() and Stats().Paused are false after Pause")
	}
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	// The two in flight finish, callbacks and all.
	s.release <- struct{}{}
	s.release <- struct{}{}
	waitFor(t, scraped, "the first page's callbacks")
	waitFor(t, scraped, "the second page's callbacks")
	// A freed download slot brings the engine to the pause.
	waitHeld(t, held, s)
	if got := s.total(); got != 3 {
		t.Fatalf("%d requests reached the server while paused, want 3 (the root and the two in flight)", got)
	}
	select {
	case <-waited:
		t.Fatal("Wait returned while paused with pages pending")
	case p := <-s.arrived:
		t.Fatalf("%s was requested while paused", p)
	case <-time.After(200 * time.Millisecond):
	}
	if st := c.Stats(); st.Pending != n-2 {
		t.Errorf("Stats().Pending = %d while paused, want %d", st.Pending, n-2)
	}
	c.Resume()
	c.Resume() // idempotent
	close(s.release)
	waitFor(t, waited, "Wait after Resume")
	if c.Paused() || c.Stats().Paused {
		t.Error("Paused() or Stats().Paused still true after Resume")
	}
	checkEveryPageOnce(t, s, n, true)
}

// TestPauseInOnResponse: Pause called from a callback of a sync crawl does
// not deadlock; the top-level Visit waits while paused and returns once
// Resume let the crawl finish.
func TestPauseInOnResponse(t *testing.T) {
	const n = 4
	s := newPauseSite(t, n)
	close(s.release)
	c := NewCollector(IgnoreRobotsTxt())
	held := pausedSignal(c)
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnResponse(func(r *Response) {
		if r.Request.URL.Path == "/" {
			c.Pause()
		}
	})
	visited := make(chan error, 1)
	go func() { visited <- c.Visit(s.URL + "/") }()
	waitFor(t, s.arrived, "the root")
	waitHeld(t, held, s)
	if got := s.total(); got != 1 {
		t.Fatalf("%d requests reached the server after Pause in OnResponse, want 1", got)
	}
	select {
	case err := <-visited:
		t.Fatalf("Visit returned (%v) while paused with pages pending", err)
	default:
	}
	c.Resume()
	if err := waitFor(t, visited, "Visit after Resume"); err != nil {
		t.Fatal(err)
	}
	checkEveryPageOnce(t, s, n, true)
}

// TestStopWhilePaused: a crawl paused before its first request ends on
// Stop: Stop, Visit and Wait return, nothing was sent, and the requests
// that waited are counted as not started. The collector stays paused.
func TestStopWhilePaused(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			s := newPauseSite(t, 2)
			c := NewCollector(Async(async), IgnoreRobotsTxt())
			held := pausedSignal(c)
			c.Pause()
			visited := make(chan error, 1)
			go func() { visited <- c.Visit(s.URL + "/") }()
			waitHeld(t, held, s)
			stopped := make(chan error, 1)
			go func() { stopped <- c.Stop() }()
			if err := waitFor(t, stopped, "Stop"); err != nil {
				t.Errorf("Stop() = %v", err)
			}
			// A sync Visit reports its request as not started.
			if err := waitFor(t, visited, "Visit"); async && err != nil {
				t.Errorf("async Visit() = %v, want nil", err)
			} else if !async && !errors.Is(err, ErrStopped) {
				t.Errorf("sync Visit() = %v, want ErrStopped", err)
			}
			waited := make(chan struct{})
			go func() { c.Wait(); close(waited) }()
			waitFor(t, waited, "Wait")
			if got := s.total(); got != 0 {
				t.Errorf("%d requests sent by a crawl stopped while paused", got)
			}
			if st := c.Stats(); st.NotStarted != 1 || !st.Paused {
				t.Errorf("Stats() NotStarted = %d, Paused = %v; want 1, true", st.NotStarted, st.Paused)
			}
		})
	}
}

// TestPauseStdlibContextEnds: a paused crawl whose StdlibContext ends
// stops as it would unpaused: Wait returns, nothing was sent, and the
// request held is counted as not started.
func TestPauseStdlibContextEnds(t *testing.T) {
	s := newPauseSite(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	c := NewCollector(Async(), IgnoreRobotsTxt(), StdlibContext(ctx))
	held := pausedSignal(c)
	c.Pause()
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, held, s)
	cancel()
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	waitFor(t, waited, "Wait after the StdlibContext ended")
	if got := s.total(); got != 0 {
		t.Errorf("%d requests sent while paused", got)
	}
	if st := c.Stats(); st.NotStarted != 1 {
		t.Errorf("Stats().NotStarted = %d, want 1", st.NotStarted)
	}
}

// renewQueue is a storage.Queue that tells each lease renewal.
type renewQueue struct {
	storage.Queue
	renewed chan struct{}
}

func (q *renewQueue) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	err := storage.RenewLeases(ctx, q.Queue, ttl, ids...)
	select {
	case q.renewed <- struct{}{}:
	default:
	}
	return err
}

// pauseQueues are the stores a paused queue run is tested over; redis is
// there when MAGPIE_REDIS_ADDR is set.
func pauseQueues(t *testing.T) map[string]func(t *testing.T) storage.Queue {
	qs := map[string]func(t *testing.T) storage.Queue{
		"memory": func(*testing.T) storage.Queue { return storage.NewMemoryQueue(0) },
		"sqlite": func(t *testing.T) storage.Queue {
			st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "q.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	if addr := os.Getenv("MAGPIE_REDIS_ADDR"); addr != "" {
		qs["redis"] = func(t *testing.T) storage.Queue {
			st, err := redisstore.New(redisstore.Options{Addr: addr, Prefix: fmt.Sprintf("pause-%d", rand.Uint64())})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = st.Clear(context.Background())
				st.Close()
			})
			return st
		}
	}
	return qs
}

// TestPauseQueueRunKeepsLeases: a queue run paused with two requests in
// flight and entries leased ahead stays paused for more than a lease TTL;
// its leases are renewed meanwhile, so no entry is taken over and fetched
// twice, and the run completes once resumed.
func TestPauseQueueRunKeepsLeases(t *testing.T) {
	old := queueLeaseTTL
	// As in TestRunQueueRenewsWaitingLeases: several leases long within
	// the test, long enough for renewals late on a loaded machine.
	queueLeaseTTL = 1200 * time.Millisecond
	t.Cleanup(func() { queueLeaseTTL = old })
	for name, open := range pauseQueues(t) {
		t.Run(name, func(t *testing.T) {
			const n = 8
			s := newPauseSite(t, n)
			q := &renewQueue{Queue: open(t), renewed: make(chan struct{}, 1)}
			for i := range n {
				pushURL(t, q, fmt.Sprintf("%s/p/%d", s.URL, i))
			}
			c := NewCollector(IgnoreRobotsTxt())
			held := pausedSignal(c)
			scraped := make(chan string, n)
			c.OnScraped(func(r *Response) { scraped <- r.Request.URL.Path })
			ran := make(chan error, 1)
			go func() { ran <- c.RunQueue(t.Context(), q, 2) }()
			waitFor(t, s.arrived, "the first page")
			waitFor(t, s.arrived, "the second page")
			c.Pause()
			s.release <- struct{}{}
			s.release <- struct{}{}
			waitFor(t, scraped, "the first page's callbacks")
			waitFor(t, scraped, "the second page's callbacks")
			waitHeld(t, held, s)
			// Paused for more than a lease TTL, told by the renewals
			// (one every third of it).
			for range 5 {
				waitFor(t, q.renewed, "a lease renewal")
			}
			if got := s.total(); got != 2 {
				t.Fatalf("%d requests reached the server while paused, want 2", got)
			}
			select {
			case err := <-ran:
				t.Fatalf("RunQueue returned (%v) while paused with entries pending", err)
			default:
			}
			c.Resume()
			close(s.release)
			if err := waitFor(t, ran, "RunQueue after Resume"); err != nil {
				t.Fatal(err)
			}
			checkEveryPageOnce(t, s, n, false)
			l, err := q.Len(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if l.Total() != 0 {
				t.Errorf("queue left with %+v", l)
			}
		})
	}
}

// TestPauseQueueRunContextEnds: RunQueue paused from the start returns
// when its context ends, having sent nothing, and leaves every entry in
// the queue.
func TestPauseQueueRunContextEnds(t *testing.T) {
	const n = 3
	s := newPauseSite(t, n)
	q := storage.NewMemoryQueue(0)
	for i := range n {
		pushURL(t, q, fmt.Sprintf("%s/p/%d", s.URL, i))
	}
	c := NewCollector(IgnoreRobotsTxt())
	held := pausedSignal(c)
	c.Pause()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- c.RunQueue(ctx, q, 2) }()
	waitHeld(t, held, s)
	cancel()
	if err := waitFor(t, ran, "RunQueue after its context ended"); !errors.Is(err, context.Canceled) {
		t.Errorf("RunQueue() = %v, want context.Canceled", err)
	}
	if got := s.total(); got != 0 {
		t.Errorf("%d requests sent while paused", got)
	}
	l, err := q.Len(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.Total() != n {
		t.Errorf("queue holds %+v after the run, want %d entries", l, n)
	}
}

// TestBlockHost: a blocked host's links are refused at admission, and its
// requests already queued when it was blocked are refused when they would
// start; none reaches it, and each refusal is counted under "blocked" and
// delivered to OnRefused with ErrHostBlocked.
func TestBlockHost(t *testing.T) {
	a := newPauseSite(t, 0)
	b := newPauseSite(t, 0)
	close(b.release)
	bURL := strings.Replace(b.URL, "127.0.0.1", "localhost", 1)
	c := NewCollector(Async(), IgnoreRobotsTxt())
	var mu sync.Mutex
	var refused []error
	c.OnRefused(func(_ *Request, err error) {
		mu.Lock()
		refused = append(refused, err)
		mu.Unlock()
	})
	c.Pause()
	// Queued while paused, then blocked: refused when they would start.
	for i := range 2 {
		if err := c.Visit(fmt.Sprintf("%s/p/%d", bURL, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Visit(a.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := c.BlockHost("LOCALHOST"); err != nil {
		t.Fatal(err)
	}
	// New ones are refused at once.
	if err := c.Visit(bURL + "/p/9"); !errors.Is(err, ErrHostBlocked) {
		t.Errorf("Visit of a blocked host = %v, want ErrHostBlocked", err)
	}
	c.Resume()
	c.Wait()
	if got := b.total(); got != 0 {
		t.Errorf("the blocked host got %d requests", got)
	}
	if got := a.total(); got != 1 {
		t.Errorf("the other host got %d requests, want 1", got)
	}
	if got := c.Stats().Refused[RefusedBlocked]; got != 3 {
		t.Errorf("Stats().Refused[%q] = %d, want 3", RefusedBlocked, got)
	}
	mu.Lock()
	got := slices.Clone(refused)
	mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("OnRefused called %d times, want 3", len(got))
	}
	for _, err := range got {
		if !errors.Is(err, ErrHostBlocked) {
			t.Errorf("OnRefused error %v, want ErrHostBlocked", err)
		}
	}
	// Unblocked, the host is crawled again.
	if err := c.UnblockHost("localhost"); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(bURL + "/p/9"); err != nil {
		t.Fatalf("Visit after UnblockHost = %v", err)
	}
	c.Wait()
	if got := b.total(); got != 1 {
		t.Errorf("the unblocked host got %d requests, want 1", got)
	}
}

// TestBlockHostQueueRun: in a queue run, the entries of a host blocked
// while the run was paused are refused, when leased or when they would
// start, and acknowledged: the queue ends empty, and the host got nothing.
func TestBlockHostQueueRun(t *testing.T) {
	const n = 6
	s := newPauseSite(t, n)
	close(s.release)
	q := storage.NewMemoryQueue(0)
	for i := range n {
		pushURL(t, q, fmt.Sprintf("%s/p/%d", s.URL, i))
	}
	c := NewCollector(IgnoreRobotsTxt())
	held := pausedSignal(c)
	c.Pause()
	ran := make(chan error, 1)
	go func() { ran <- c.RunQueue(t.Context(), q, 2) }()
	waitHeld(t, held, s)
	// The host as the URLs name it: 127.0.0.1 and its port.
	if err := c.BlockHost(strings.TrimPrefix(s.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	c.Resume()
	if err := waitFor(t, ran, "RunQueue"); err != nil {
		t.Fatal(err)
	}
	if got := s.total(); got != 0 {
		t.Errorf("the blocked host got %d requests", got)
	}
	if got := c.Stats().Refused[RefusedBlocked]; got != n {
		t.Errorf("Stats().Refused[%q] = %d, want %d", RefusedBlocked, got, n)
	}
	l, err := q.Len(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.Total() != 0 {
		t.Errorf("queue left with %+v: refused entries must be acknowledged", l)
	}
}

// TestBlockHostMatching: how BlockHost names match URLs, and the hosts it
// rejects.
func TestBlockHostMatching(t *testing.T) {
	for _, tc := range []struct {
		block   string
		url     string
		blocked bool
	}{
		{"example.com", "http://EXAMPLE.com/a", true},
		{"Example.COM", "https://example.com:8443/a", true},
		{"example.com:8443", "https://example.com:8443/a", true},
		{"example.com:8443", "https://example.com/a", false},
		{"example.com:443", "https://example.com/a", true},
		{"example.com:80", "http://example.com:80/a", true},
		{"example.com", "http://www.example.com/a", false},
		{"BÜCHER.example", "http://xn--bcher-kva.example/", true},
		{"xn--bcher-kva.example", "http://bücher.example/", true},
		{"[::1]:8080", "http://[::1]:8080/", true},
		{"::1", "http://[::1]:8080/", true},
		{"[::1]", "http://[::1]:8080/", true},
		{"127.0.0.1", "http://127.0.0.1:9/", true},
	} {
		t.Run(tc.block+" "+tc.url, func(t *testing.T) {
			c := NewCollector(IgnoreRobotsTxt(), Async())
			c.Pause() // nothing is sent: only admission is tested
			defer c.Stop()
			if err := c.BlockHost(tc.block); err != nil {
				t.Fatalf("BlockHost(%q) = %v", tc.block, err)
			}
			err := c.Visit(tc.url)
			if got := errors.Is(err, ErrHostBlocked); got != tc.blocked {
				t.Errorf("Visit(%q) after BlockHost(%q) = %v, blocked %v, want %v", tc.url, tc.block, err, got, tc.blocked)
			}
		})
	}
	c := NewCollector()
	for _, bad := range []string{"", "  ", "http://example.com/", "example.com/a", "a b", "user@example.com", "example.com:", "example.com:http", ":80"} {
		if err := c.BlockHost(bad); !errors.Is(err, ErrInvalidHost) {
			t.Errorf("BlockHost(%q) = %v, want ErrInvalidHost", bad, err)
		}
		if err := c.UnblockHost(bad); !errors.Is(err, ErrInvalidHost) {
			t.Errorf("UnblockHost(%q) = %v, want ErrInvalidHost", bad, err)
		}
	}
}

// robotsSite is one server reached as two hosts, 127.0.0.1 and localhost
// (two robots.txt), that counts and tells every request, robots.txt
// included: the root on 127.0.0.1 links to /b on localhost.
type robotsSite struct {
	*httptest.Server
	other   string // the server's URL as localhost
	arrived chan string
	mu      sync.Mutex
	hits    map[string]int // by host and path
}

func newRobotsSite(t *testing.T) *robotsSite {
	s := &robotsSite{arrived: make(chan string, 64), hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Host + r.URL.Path
		s.mu.Lock()
		s.hits[k]++
		s.mu.Unlock()
		s.arrived <- k
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprintf(w, `<a href="%s/b">b</a>`, s.other)
		}
	}))
	s.other = strings.Replace(s.URL, "127.0.0.1", "localhost", 1)
	t.Cleanup(s.Close)
	return s
}

func (s *robotsSite) count(k string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[k]
}

// waitHeldRobots is waitHeld for a robotsSite.
func waitHeldRobots(t *testing.T, held <-chan struct{}, s *robotsSite) {
	t.Helper()
	select {
	case <-held:
	case k := <-s.arrived:
		t.Fatalf("%s was requested while paused", k)
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the engine to wait for Resume")
	}
}

// TestPauseDefersRobots: while paused, admission fetches no robots.txt it
// does not know yet (a Visit, a link found by a request in flight, a queue
// entry admitted on its lease): each is fetched, once, after Resume,
// before the request it checks.
func TestPauseDefersRobots(t *testing.T) {
	t.Run("link", func(t *testing.T) {
		s := newRobotsSite(t)
		c := NewCollector(Async())
		held := pausedSignal(c)
		c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		c.OnResponse(func(r *Response) {
			if r.Request.URL.Path == "/" {
				c.Pause()
			}
		})
		if err := c.Visit(s.URL + "/"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, s.arrived, "the first robots.txt")
		waitFor(t, s.arrived, "the root")
		waitHeldRobots(t, held, s)
		c.Resume()
		c.Wait()
		bHost := strings.TrimPrefix(s.other, "http://")
		if n, m := s.count(bHost+"/robots.txt"), s.count(bHost+"/b"); n != 1 || m != 1 {
			t.Errorf("after Resume: robots.txt fetched %d times, the page %d; want 1, 1", n, m)
		}
	})
	t.Run("visit", func(t *testing.T) {
		s := newRobotsSite(t)
		c := NewCollector(Async())
		held := pausedSignal(c)
		c.Pause()
		if err := c.Visit(s.other + "/b"); err != nil {
			t.Fatal(err)
		}
		waitHeldRobots(t, held, s)
		c.Resume()
		c.Wait()
		bHost := strings.TrimPrefix(s.other, "http://")
		if n, m := s.count(bHost+"/robots.txt"), s.count(bHost+"/b"); n != 1 || m != 1 {
			t.Errorf("after Resume: robots.txt fetched %d times, the page %d; want 1, 1", n, m)
		}
	})
	t.Run("queue", func(t *testing.T) {
		s := newRobotsSite(t)
		q := storage.NewMemoryQueue(0)
		pushURL(t, q, s.other+"/b")
		pushURL(t, q, s.other+"/c")
		c := NewCollector()
		held := pausedSignal(c)
		c.Pause()
		ran := make(chan error, 1)
		go func() { ran <- c.RunQueue(t.Context(), q, 2) }()
		waitHeldRobots(t, held, s)
		c.Resume()
		if err := waitFor(t, ran, "RunQueue"); err != nil {
			t.Fatal(err)
		}
		bHost := strings.TrimPrefix(s.other, "http://")
		if n, m, o := s.count(bHost+"/robots.txt"), s.count(bHost+"/b"), s.count(bHost+"/c"); n != 1 || m != 1 || o != 1 {
			t.Errorf("after Resume: robots.txt fetched %d times, the pages %d and %d; want 1, 1, 1", n, m, o)
		}
	})
}

// TestBlockHostAsksNoRobots: a link to a blocked host is refused before
// its robots.txt would be fetched.
func TestBlockHostAsksNoRobots(t *testing.T) {
	s := newRobotsSite(t)
	c := NewCollector(Async())
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.BlockHost("localhost"); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	bHost := strings.TrimPrefix(s.other, "http://")
	if n := s.count(bHost + "/robots.txt"); n != 0 {
		t.Errorf("the blocked host's robots.txt was fetched %d times", n)
	}
	if got := c.Stats().Refused[RefusedBlocked]; got != 1 {
		t.Errorf("Stats().Refused[%q] = %d, want 1", RefusedBlocked, got)
	}
}

// A redirect to a blocked host is refused at the hop, as a link to it is:
// the blocked host gets no request, and the error names the block.
func TestBlockHostRedirectHop(t *testing.T) {
	var blockedHits sync.Map
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		blockedHits.Store(r.URL.Path, true)
		fmt.Fprint(w, "<title>b</title>")
	}))
	t.Cleanup(b.Close)
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, b.URL+"/landing", http.StatusFound)
	}))
	t.Cleanup(a.Close)
	c := NewCollector(IgnoreRobotsTxt())
	if err := c.BlockHost(strings.TrimPrefix(b.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	var onError error
	c.OnError(func(_ *Response, err error) { onError = err })
	err := c.Visit(a.URL + "/moved")
	if !errors.Is(err, ErrHostBlocked) || !errors.Is(onError, ErrHostBlocked) {
		t.Errorf("Visit(/moved) error = %v, OnError got %v, want both to wrap ErrHostBlocked", err, onError)
	}
	blockedHits.Range(func(k, _ any) bool {
		t.Errorf("the blocked host got a request for %v", k)
		return true
	})
}
