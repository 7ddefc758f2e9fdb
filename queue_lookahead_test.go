package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/storage"
)

// countingQueue wraps a storage.Queue and counts the calls that reach it.
type countingQueue struct {
	storage.Queue
	pushes, leases, acks, renews atomic.Int64
	renewed                      atomic.Int64
}

func (q *countingQueue) Push(ctx context.Context, data ...[]byte) error {
	q.pushes.Add(1)
	return q.Queue.Push(ctx, data...)
}

func (q *countingQueue) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	q.leases.Add(1)
	return q.Queue.Lease(ctx, n, ttl)
}

func (q *countingQueue) Ack(ctx context.Context, ids ...string) error {
	q.acks.Add(1)
	return q.Queue.Ack(ctx, ids...)
}

func (q *countingQueue) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	q.renews.Add(1)
	q.renewed.Add(int64(len(ids)))
	return storage.RenewLeases(ctx, q.Queue, ttl, ids...)
}

// hostServer is one host of a multi-host test crawl: it counts requests per
// path and may hold them until release is closed.
type hostServer struct {
	*httptest.Server
	mu      sync.Mutex
	fetches map[string]int
	hold    chan struct{}
	first   chan struct{} // closed at the first request
	once    sync.Once
	body    func(path string) string
}

func newHostServer(t *testing.T, hold bool, body func(string) string) *hostServer {
	t.Helper()
	h := &hostServer{fetches: map[string]int{}, first: make(chan struct{}), body: body}
	if hold {
		h.hold = make(chan struct{})
	}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.fetches[r.URL.Path]++
		h.mu.Unlock()
		h.once.Do(func() { close(h.first) })
		if h.hold != nil {
			select {
			case <-h.hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		if h.body != nil {
			fmt.Fprint(w, h.body(r.URL.Path))
			return
		}
		fmt.Fprint(w, "<html><body>ok</body></html>")
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hostServer) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.fetches))
	for k, v := range h.fetches {
		out[k] = v
	}
	return out
}

// TestRunQueueLooksAheadByHost: the queue's head holds 6 entries for a host
// that allows one request at a time and is stuck on the first; the other
// hosts' entries come after them. A run that leased only 2 entries per
// thread ahead (4 here) would leave those hosts idle until the slow host
// moved; the look-ahead leases past the slow host's entries and starts them.
func TestRunQueueLooksAheadByHost(t *testing.T) {
	slow := newHostServer(t, true, nil)
	others := make([]*hostServer, 4)
	for i := range others {
		others[i] = newHostServer(t, false, nil)
	}
	q := storage.NewMemoryQueue(0)
	const slowPages = 6
	for i := range slowPages {
		pushURL(t, q, fmt.Sprintf("%s/slow/%d", slow.URL, i))
	}
	for i, o := range others {
		pushURL(t, q, fmt.Sprintf("%s/other/%d", o.URL, i))
	}
	c := NewCollector(QueueLookahead(64), IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(t.Context(), q, 2) }()
	deadline := time.After(20 * time.Second)
	for i, o := range others {
		select {
		case <-o.first:
		case <-deadline:
			close(slow.hold)
			<-done
			t.Fatalf("host %d was not requested while the slow host held the head of the queue", i)
		}
	}
	close(slow.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for p, n := range slow.counts() {
		if n != 1 {
			t.Errorf("%s fetched %d times", p, n)
		}
	}
	if got := len(slow.counts()); got != slowPages {
		t.Errorf("slow host: %d pages fetched, want %d", got, slowPages)
	}
}

// TestRunQueueLookaheadBoundedForOneHost: a frontier of one host does not
// grow the look-ahead: while that host is stuck, the run holds its baseline
// (2 entries per thread) and then stops after as many entries in a row that
// found the host busy.
func TestRunQueueLookaheadBoundedForOneHost(t *testing.T) {
	slow := newHostServer(t, true, nil)
	q := newFIFOMemQueue() // the FIFO path: a Colly queue storage's
	for i := range 1000 {
		pushURL(t, q, fmt.Sprintf("%s/p/%d", slow.URL, i))
	}
	const threads, lookahead = 2, 64
	c := NewCollector(QueueLookahead(lookahead), IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(ctx, q, threads) }()
	<-slow.first
	// The feeder leases until the budget is spent, then waits for a finish
	// that cannot come while the host is held: the count settles at the
	// bound and must never pass it.
	// base (2 per thread), then as many surplus leases in a row.
	bound := 2 * (2 * threads)
	reached := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !reached; {
		l, err := q.Len(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if l.Leased > bound {
			t.Fatalf("%d entries leased for one stuck host, want at most %d", l.Leased, bound)
		}
		reached = l.Leased == bound
		if !reached {
			runtime.Gosched()
		}
	}
	if !reached {
		l, _ := q.Len(t.Context())
		t.Errorf("look-ahead settled at %d leased entries, want %d", l.Leased, bound)
	}
	cancel()
	close(slow.hold)
	<-done
	l, err := q.Len(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.Leased != 0 {
		t.Errorf("%d entries still leased after the run stopped", l.Leased)
	}
}

// TestRunQueueRenewsWaitingLeases: entries leased ahead wait behind a host
// with a Delay for several lease TTLs; the run renews them, so none expires
// and is leased (and fetched) a second time.
func TestRunQueueRenewsWaitingLeases(t *testing.T) {
	old := queueLeaseTTL
	// Short enough that the waits below span several leases, long enough
	// that a renewal (every third of it) late by a loaded machine's
	// scheduling still comes in time.
	queueLeaseTTL = 1200 * time.Millisecond
	t.Cleanup(func() { queueLeaseTTL = old })
	h := newHostServer(t, false, nil)
	q := &countingQueue{Queue: storage.NewMemoryQueue(0)}
	const pages = 8
	for i := range pages {
		pushURL(t, q, fmt.Sprintf("%s/p/%d", h.URL, i))
	}
	c := NewCollector(IgnoreRobotsTxt())
	// 8 pages 500 ms apart: the last waits about 3.5 s, about 3 TTLs.
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1, Delay: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// Expired leases would be leased again and again: a deadline turns
	// that into a failure instead of a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.RunQueue(ctx, q, 4); err != nil {
		t.Fatal(err)
	}
	got := h.counts()
	if len(got) != pages {
		t.Errorf("%d pages fetched, want %d", len(got), pages)
	}
	for p, n := range got {
		if n != 1 {
			t.Errorf("%s fetched %d times: its lease expired while it waited", p, n)
		}
	}
	if q.renews.Load() == 0 {
		t.Error("no lease was renewed")
	}
	l, err := q.Len(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.Total() != 0 {
		t.Errorf("queue left with %+v", l)
	}
}

// TestRunQueueBatchesLinks: the links of one page reach the queue in one
// Push (one round trip), not one per link; links already visited are
// refused when the batch is stored, and reported as refusals.
func TestRunQueueBatchesLinks(t *testing.T) {
	const links = 50
	h := newHostServer(t, false, func(path string) string {
		if path != "/" {
			return "<html><body>leaf <a href=\"/\">home</a></body></html>"
		}
		var b strings.Builder
		b.WriteString("<html><body>")
		for i := range links {
			fmt.Fprintf(&b, `<a href="/leaf/%d">%d</a>`, i, i)
		}
		b.WriteString("</body></html>")
		return b.String()
	})
	q := &countingQueue{Queue: storage.NewMemoryQueue(0)}
	pushURL(t, q, h.URL+"/")
	c := NewCollector(IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var refused atomic.Int64
	c.OnRefused(func(_ *Request, err error) {
		if _, ok := err.(*AlreadyVisitedError); ok {
			refused.Add(1)
		}
	})
	if err := c.RunQueue(t.Context(), q, 4); err != nil {
		t.Fatal(err)
	}
	got := h.counts()
	if len(got) != links+1 {
		t.Fatalf("%d pages fetched, want %d", len(got), links+1)
	}
	for p, n := range got {
		if n != 1 {
			t.Errorf("%s fetched %d times", p, n)
		}
	}
	// The seed, then one batch for the home page. Each leaf links back
	// home, which is visited: its batch pushes nothing.
	if n := q.pushes.Load(); n != 2 {
		t.Errorf("%d Push calls, want 2 (the seed and the home page's %d links in one)", n, links)
	}
	if n := refused.Load(); n != links {
		t.Errorf("%d links refused as visited, want %d (each leaf's link home)", n, links)
	}
	if n := q.acks.Load(); n > links+1 {
		t.Errorf("%d Ack calls for %d pages", n, links+1)
	}
}

// countingVisited wraps the in-memory store and counts AddVisited calls.
type countingVisited struct {
	*storage.InMemoryStorage
	calls atomic.Int64
}

func (s *countingVisited) AddVisited(ctx context.Context, ids ...uint64) ([]bool, error) {
	s.calls.Add(1)
	return s.InMemoryStorage.AddVisited(ctx, ids...)
}

// TestRunQueueMarksLeaseBatches: entries queued without admission are
// marked visited a Lease batch at a time (one AddVisited call for many
// entries), and an entry refused by admission after its batch marked it
// loses the mark again.
func TestRunQueueMarksLeaseBatches(t *testing.T) {
	h := newHostServer(t, false, nil)
	q := storage.NewMemoryQueue(0)
	const pages = 64
	// The refused entry goes into the first Lease batch with the others.
	pushURL(t, q, h.URL+"/private/x")
	for i := range pages {
		pushURL(t, q, fmt.Sprintf("%s/p/%d", h.URL, i))
	}
	st := &countingVisited{InMemoryStorage: &storage.InMemoryStorage{}}
	c := NewCollector(IgnoreRobotsTxt(), DisallowedURLFilters(regexp.MustCompile(`/private/`)))
	if err := c.SetStorage(st); err != nil {
		t.Fatal(err)
	}
	if err := c.RunQueue(t.Context(), q, 16); err != nil {
		t.Fatal(err)
	}
	if got := len(h.counts()); got != pages {
		t.Errorf("%d pages fetched, want %d", got, pages)
	}
	if n := st.calls.Load(); n > pages/2 {
		t.Errorf("%d AddVisited calls for %d entries: not marked in batches", n, pages)
	}
	key := urlkey.RequestKey(http.MethodGet, urlkey.Canonical(mustParse(t, h.URL+"/private/x"), false), nil)
	if seen, err := st.IsVisited(key); err != nil || seen {
		t.Errorf("refused entry left marked visited (seen %v, err %v)", seen, err)
	}
}

// TestRunQueueDefaultLookaheadGrowsWithHosts: 200 hosts, each with a run of
// 8 entries in the FIFO queue and a Delay no test waits out, so that each
// host can start one request and the rest of its run waits in the gate.
// With the default look-ahead every host's first page is fetched: the
// look-ahead grows with the hosts that have entries in hand. A fixed 512
// (half of it for entries past a host's first two) stalls after about 40
// hosts, until their Delay passes.
func TestRunQueueDefaultLookaheadGrowsWithHosts(t *testing.T) {
	const hosts, perHost = 200, 8
	var started atomic.Int32
	servers := make([]*hostServer, hosts)
	for i := range servers {
		servers[i] = newHostServer(t, false, nil)
	}
	q := newFIFOMemQueue() // the FIFO path: a Colly queue storage's
	for i, s := range servers {
		for p := range perHost {
			pushURL(t, q, fmt.Sprintf("%s/h%d/%d", s.URL, i, p))
		}
	}
	c := NewCollector(IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c.OnResponse(func(*Response) { started.Add(1) })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(ctx, q, 2) }()
	for i, s := range servers {
		select {
		case <-s.first:
		case <-time.After(30 * time.Second):
			cancel()
			<-done
			t.Fatalf("host %d of %d never requested (%d pages fetched): the look-ahead stopped short of it", i, hosts, started.Load())
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("RunQueue() = %v", err)
	}
	for i, s := range servers {
		for p, n := range s.counts() {
			if n != 1 {
				t.Errorf("host %d: %s fetched %d times", i, p, n)
			}
		}
	}
}

// TestQueueLookaheadCap: the default cap is DefaultQueueLookahead while few
// hosts have entries in hand, 32 per host past that, and never more than
// 65,536; a QueueLookahead that is set stays the cap whatever the hosts.
func TestQueueLookaheadCap(t *testing.T) {
	held := func(n int) map[string]int {
		m := make(map[string]int, n)
		for i := range n {
			m[fmt.Sprintf("h%d.test", i)] = 1
		}
		return m
	}
	for _, tt := range []struct {
		name  string
		opts  []CollectorOption
		hosts int
		want  int
	}{
		{"default, one host", nil, 1, DefaultQueueLookahead},
		{"default, 10 hosts", nil, 10, DefaultQueueLookahead},
		{"default, 200 hosts", nil, 200, 200 * autoLookaheadPerHost},
		{"default, 20,000 hosts", nil, 20_000, maxAutoLookahead},
		{"set, 200 hosts", []CollectorOption{QueueLookahead(64)}, 200, 64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCollector(tt.opts...)
			cfg := c.snapshot()
			f := newQueueFrontier(c, cfg, newFIFOMemQueue(), 2)
			f.held = held(tt.hosts)
			f.mu.Lock()
			got := f.limitLocked()
			f.mu.Unlock()
			if got != tt.want {
				t.Errorf("look-ahead cap with %d hosts in hand = %d, want %d", tt.hosts, got, tt.want)
			}
		})
	}
}

// TestQueueStreakDoesNotWaitOutDelays: the queue's head is one host's run
// of 8 entries, then another host's. Leased 4 at a time by a run of 2
// workers, the first host's first request finishes before the second
// batch is leased, whose surplus entries make a streak that stops leasing;
// the rest of that host's entries wait out a long Delay, so no request
// finishes to make room. The next entry, the second host's, must still be
// leased, within about streakPatience, rather than after the Delay.
func TestQueueStreakDoesNotWaitOutDelays(t *testing.T) {
	q := newFIFOMemQueue() // the FIFO path: a Colly queue storage's
	for _, host := range []string{"a.test", "b.test"} {
		for p := range 8 {
			pushURL(t, q, fmt.Sprintf("http://%s/%d", host, p))
		}
	}
	c := NewCollector(IgnoreRobotsTxt())
	f := newQueueFrontier(c, c.snapshot(), q, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	defer f.close()
	leased := 0
	next := func() *Request {
		t.Helper()
		req, err := f.next(ctx)
		if err != nil {
			t.Fatalf("next() error = %v after %d entries", err, leased)
		}
		leased++
		return req
	}
	first := next()
	for range 3 {
		next()
	}
	f.finish(ctx, first, true)
	for range 4 {
		if req := next(); req.URL.Host != "a.test" {
			t.Fatalf("leased %s before a.test's run ended", req.URL)
		}
	}
	f.mu.Lock()
	streak := f.streak
	f.mu.Unlock()
	if streak < f.streakLimit() {
		t.Fatalf("streak %d after a.test's surplus entries, want the limit %d: the case is not set up", streak, f.streakLimit())
	}
	start := time.Now()
	if req := next(); req.URL.Host != "b.test" {
		t.Fatalf("next() = %s, want b.test's first entry", req.URL)
	}
	t.Logf("b.test's first entry leased %v after the streak stopped leasing", time.Since(start))
}

// fifoMemQueue is the memory queue without storage.HostQueue: a FIFO queue
// that renews leases, releases in batches and notifies, as a third-party
// queue storage may, so that a run over it takes the FIFO path and its
// look-ahead.
type fifoMemQueue struct {
	storage.Queue
	m *storage.MemoryQueue
}

func newFIFOMemQueue() fifoMemQueue {
	m := storage.NewMemoryQueue(0)
	return fifoMemQueue{Queue: m, m: m}
}

func (q fifoMemQueue) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	return q.m.Renew(ctx, ttl, ids...)
}

func (q fifoMemQueue) ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error {
	return q.m.ReleaseBatch(ctx, notBefore, ids...)
}

func (q fifoMemQueue) Notify() <-chan struct{} { return q.m.Notify() }
