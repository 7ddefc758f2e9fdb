package magpie

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// errFlaky is what flakyQueue and flakyVisited fail with.
var errFlaky = errors.New("flaky: connection refused")

// flakyQueue is a storage.Queue over the in-memory queue whose operations
// fail on demand: fail[op] more times, or every time while down is set.
type flakyQueue struct {
	*storage.MemoryQueue
	// mu guards the fields below.
	mu    sync.Mutex
	fail  map[string]int
	down  map[string]bool
	calls map[string]int
	// granted holds the leases the memory queue granted and nobody
	// acknowledged or released, for ReleaseUnheld.
	granted map[string]bool
	// failed receives the op of every injected failure, when not nil.
	failed chan string
}

func newFlakyQueue() *flakyQueue {
	return &flakyQueue{MemoryQueue: storage.NewMemoryQueue(0), fail: map[string]int{}, down: map[string]bool{}, calls: map[string]int{}, granted: map[string]bool{}}
}

func (q *flakyQueue) inject(op string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls[op]++
	if q.down[op] || q.fail[op] > 0 {
		if q.fail[op] > 0 {
			q.fail[op]--
		}
		if q.failed != nil {
			select {
			case q.failed <- op:
			default:
			}
		}
		return fmt.Errorf("%s: %w", op, errFlaky)
	}
	return nil
}

func (q *flakyQueue) setDown(op string, down bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.down[op] = down
}

func (q *flakyQueue) Push(ctx context.Context, data ...[]byte) error {
	if err := q.inject("push"); err != nil {
		return err
	}
	return q.MemoryQueue.Push(ctx, data...)
}

func (q *flakyQueue) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	if err := q.inject("lease"); err != nil {
		return nil, err
	}
	es, err := q.MemoryQueue.Lease(ctx, n, ttl)
	q.mu.Lock()
	for _, e := range es {
		q.granted[e.ID] = true
	}
	q.mu.Unlock()
	// "lostlease" fails after the entries were granted, as a Lease whose
	// reply the network lost.
	if err == nil {
		err = q.inject("lostlease")
	}
	return es, err
}

// PushHosted and LeaseHosts fail as Push and Lease do: a queue run over
// the memory queue (a HostQueue) calls them instead.
func (q *flakyQueue) PushHosted(ctx context.Context, entries ...storage.HostEntry) error {
	if err := q.inject("push"); err != nil {
		return err
	}
	return q.MemoryQueue.PushHosted(ctx, entries...)
}

func (q *flakyQueue) LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	if err := q.inject("lease"); err != nil {
		return nil, err
	}
	es, err := q.MemoryQueue.LeaseHosts(ctx, now, n, perHost, ttl)
	q.mu.Lock()
	for _, e := range es {
		q.granted[e.ID] = true
	}
	q.mu.Unlock()
	if err == nil {
		err = q.inject("lostlease")
	}
	return es, err
}

func (q *flakyQueue) Ack(ctx context.Context, ids ...string) error {
	if err := q.inject("ack"); err != nil {
		return err
	}
	q.mu.Lock()
	for _, id := range ids {
		delete(q.granted, id)
	}
	q.mu.Unlock()
	return q.MemoryQueue.Ack(ctx, ids...)
}

func (q *flakyQueue) Release(ctx context.Context, id string, notBefore time.Time) error {
	if err := q.inject("release"); err != nil {
		return err
	}
	q.mu.Lock()
	delete(q.granted, id)
	q.mu.Unlock()
	return q.MemoryQueue.Release(ctx, id, notBefore)
}

// ReleaseUnheld implements the frontier's leaseReclaimer.
func (q *flakyQueue) ReleaseUnheld(ctx context.Context, held []string) error {
	if err := q.inject("reclaim"); err != nil {
		return err
	}
	q.mu.Lock()
	var lost []string
	for id := range q.granted {
		if !slices.Contains(held, id) {
			lost = append(lost, id)
		}
	}
	q.mu.Unlock()
	for _, id := range lost {
		if err := q.Release(ctx, id, time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

func (q *flakyQueue) Len(ctx context.Context) (storage.QueueLen, error) {
	if err := q.inject("len"); err != nil {
		return storage.QueueLen{}, err
	}
	return q.MemoryQueue.Len(ctx)
}

// flakyVisited is an in-memory visited set whose AddVisited fails fail times.
type flakyVisited struct {
	storage.InMemoryStorage
	// mu guards fail.
	mu   sync.Mutex
	fail int
}

func (s *flakyVisited) AddVisited(ctx context.Context, ids ...uint64) ([]bool, error) {
	s.mu.Lock()
	if s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		return nil, errFlaky
	}
	s.mu.Unlock()
	return s.InMemoryStorage.AddVisited(ctx, ids...)
}

// treeSite serves pages /p/0 … /p/n-1; page i links to 2i+1, 2i+2 and back
// to /p/0, so a crawl from /p/0 reaches every page. It counts fetches.
type treeSite struct {
	*httptest.Server
	n int
	// mu guards hits.
	mu   sync.Mutex
	hits map[int]int
}

func newTreeSite(t testing.TB, n int) *treeSite {
	t.Helper()
	s := &treeSite{n: n, hits: map[int]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || i < 0 || i >= n {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.hits[i]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><a href="/p/0">home</a>`)
		for _, j := range []int{2*i + 1, 2*i + 2} {
			if j < n {
				fmt.Fprintf(w, ` <a href="/p/%d">%d</a>`, j, j)
			}
		}
		fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(s.Close)
	return s
}

// check reports pages fetched other than once.
func (s *treeSite) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.n {
		if got := s.hits[i]; got != 1 {
			t.Errorf("page /p/%d fetched %d times, want 1", i, got)
		}
	}
}

// storageErrors collects the StorageErrors OnError receives.
type storageErrors struct {
	mu   sync.Mutex
	errs []*StorageError
}

func (s *storageErrors) onError(_ *Response, err error) {
	var se *StorageError
	if errors.As(err, &se) {
		s.mu.Lock()
		s.errs = append(s.errs, se)
		s.mu.Unlock()
	}
}

func (s *storageErrors) ops() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ops []string
	for _, e := range s.errs {
		ops = append(ops, e.Op)
	}
	return ops
}

// newOutageCollector crawls every link and records storage errors and logs.
func newOutageCollector(t *testing.T, logs io.Writer) (*Collector, *storageErrors) {
	t.Helper()
	c := NewCollector(IgnoreRobotsTxt(), Logger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	se := &storageErrors{}
	c.OnError(se.onError)
	return c, se
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRunQueueSurvivesStorageFailures fails one kind of queue operation (or
// the visited set) a few times in a row mid-crawl: the crawl pauses and
// resumes, every page is fetched exactly once, and OnError hears of the
// outage once.
func TestRunQueueSurvivesStorageFailures(t *testing.T) {
	const pages = 60
	tests := []struct {
		op         string
		fails      int
		visited    bool   // fail the visited set instead of the queue
		reportedAs string // the StorageError's Op, when not op
	}{
		// Enough failures that one goroutine sees a second attempt even
		// when several share them.
		{op: "push", fails: 9},
		{op: "lease", fails: 4},
		{op: "ack", fails: 9},
		{op: "len", fails: 3},
		// The entries of lost Lease replies stay leased for the lease TTL
		// (minutes) unless the frontier takes them back.
		{op: "lostlease", fails: 3, reportedAs: "lease"},
		{op: "visited", fails: 3, visited: true},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			site := newTreeSite(t, pages)
			logs := &syncBuffer{}
			c, se := newOutageCollector(t, logs)
			q := newFlakyQueue()
			vs := &flakyVisited{}
			if err := c.SetStorage(vs); err != nil {
				t.Fatal(err)
			}
			// Arm the failures once the crawl is under way: the first
			// page's callbacks arm them, so they hit the middle of the crawl.
			var once sync.Once
			c.OnResponse(func(r *Response) {
				if r.Request.URL.Path != "/p/3" {
					return
				}
				once.Do(func() {
					if tt.visited {
						vs.mu.Lock()
						vs.fail = tt.fails
						vs.mu.Unlock()
						return
					}
					q.mu.Lock()
					q.fail[tt.op] = tt.fails
					q.mu.Unlock()
				})
			})
			if tt.op == "len" {
				// Len is asked only when the queue looks empty: at the end.
				q.fail["len"] = tt.fails
			}
			req, err := c.newRequest(site.URL+"/p/0", http.MethodGet, 1, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			data, err := req.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if err := q.MemoryQueue.Push(t.Context(), data); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := c.RunQueue(ctx, q, 4); err != nil {
				t.Fatalf("RunQueue() error = %v, want nil", err)
			}
			site.check(t)
			want := cmp.Or(tt.reportedAs, tt.op)
			if got := se.ops(); len(got) != 1 || got[0] != want {
				t.Errorf("OnError storage errors = %v, want one for %q", got, want)
			}
			for _, e := range se.errs {
				if !errors.Is(e, ErrStorageUnavailable) || !errors.Is(e, errFlaky) {
					t.Errorf("OnError got %v, want errors.Is ErrStorageUnavailable and the storage's error", e)
				}
			}
			out := logs.String()
			if !strings.Contains(out, "level=WARN msg=\"storage failing; retrying\" op="+want) || !strings.Contains(out, "attempt=2") {
				t.Errorf("logs lack a Warn per retry of %s with its attempt:\n%s", want, out)
			}
			if !strings.Contains(out, "level=INFO msg=\"storage recovered\" op="+want) {
				t.Errorf("logs lack the Info of the recovery of %s:\n%s", want, out)
			}
			if l, err := q.MemoryQueue.Len(t.Context()); err != nil || l.Total() != 0 {
				t.Errorf("queue after the crawl: Len() = %+v, %v, want empty", l, err)
			}
		})
	}
}

// TestRunQueueReleasesParentOfUnstoredLink stops a run while pushes fail:
// the links found are not stored, so their parent goes back to the queue
// instead of being acknowledged, and the next run fetches it again and
// crawls everything.
func TestRunQueueReleasesParentOfUnstoredLink(t *testing.T) {
	const pages = 15
	site := newTreeSite(t, pages)
	logs := &syncBuffer{}
	c, se := newOutageCollector(t, logs)
	q := newFlakyQueue()
	q.failed = make(chan string, 1)
	if err := c.SetStorage(&flakyVisited{}); err != nil {
		t.Fatal(err)
	}
	q.setDown("push", true)
	req, err := c.newRequest(site.URL+"/p/0", http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := req.Marshal()
	if err := q.MemoryQueue.Push(t.Context(), data); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(ctx, q, 2) }()
	select {
	case <-q.failed:
	case <-time.After(10 * time.Second):
		t.Fatal("no push was tried within 10s")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunQueue() error = %v, want context.Canceled", err)
	}
	if got := se.ops(); len(got) != 1 || got[0] != "push" {
		t.Errorf("OnError storage errors = %v, want one for push", got)
	}
	l, err := q.MemoryQueue.Len(t.Context())
	if err != nil || l.Ready != 1 || l.Total() != 1 {
		t.Fatalf("queue after the stopped run: Len() = %+v, %v, want the root entry back, ready\n%s", l, err, logs)
	}

	q.setDown("push", false)
	if err := c.RunQueue(t.Context(), q, 2); err != nil {
		t.Fatalf("second RunQueue() error = %v, want nil", err)
	}
	site.mu.Lock()
	if site.hits[0] != 2 {
		t.Errorf("root fetched %d times, want 2 (once per run)", site.hits[0])
	}
	site.hits[0] = 1
	site.mu.Unlock()
	site.check(t)
}

// TestStorageBackoff checks the backoff's bounds: doubling from
// storageBackoffMin, jittered in the upper half, capped at storageBackoffMax.
func TestStorageBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration // upper bound; the lower is half of it
	}{
		{1, storageBackoffMin},
		{2, 2 * storageBackoffMin},
		{4, 8 * storageBackoffMin},
		{7, 64 * storageBackoffMin},
		{8, storageBackoffMax},
		{30, storageBackoffMax},
		{1000, storageBackoffMax},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.attempt), func(t *testing.T) {
			for range 100 {
				if d := storageBackoff(tt.attempt); d < tt.want/2 || d > tt.want {
					t.Fatalf("storageBackoff(%d) = %v, want in [%v, %v]", tt.attempt, d, tt.want/2, tt.want)
				}
			}
		})
	}
}

// TestPersist runs outages.persist in virtual time: it retries transient
// failures with backoff, reports the outage once, gives up with a
// StorageError when ctx ends, and returns a permanent error at once.
func TestPersist(t *testing.T) {
	tests := []struct {
		name      string
		fails     int           // failures before success (-1: always)
		err       error         // what do fails with
		stopAfter time.Duration // cancel ctx after this (0: never)
		wantErr   error
		wantCalls int
		wantOnErr int
	}{
		{name: "recovers", fails: 5, err: errFlaky, wantCalls: 6, wantOnErr: 1},
		{name: "first try", fails: 0, err: errFlaky, wantCalls: 1, wantOnErr: 0},
		{name: "gives up when the run stops", fails: -1, err: errFlaky, stopAfter: 20 * time.Second, wantErr: ErrStorageUnavailable, wantOnErr: 1},
		{name: "permanent", fails: -1, err: storage.ErrUnknownLease, wantErr: storage.ErrUnknownLease, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := NewCollector()
				onErr := 0
				c.OnError(func(r *Response, err error) {
					_ = r.Request.URL.String() // must not panic for a request-less op
					onErr++
				})
				o := newOutages(c)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tt.stopAfter > 0 {
					time.AfterFunc(tt.stopAfter, cancel)
				}
				calls := 0
				start := time.Now()
				var gaps []time.Duration
				last := start
				err := o.persist(ctx, "push", nil, func(context.Context) error {
					gaps = append(gaps, time.Since(last))
					last = time.Now()
					calls++
					if tt.fails < 0 || calls <= tt.fails {
						return tt.err
					}
					return nil
				})
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Fatalf("persist() error = %v, want %v", err, tt.wantErr)
				}
				if tt.wantCalls > 0 && calls != tt.wantCalls {
					t.Errorf("persist() called do %d times, want %d", calls, tt.wantCalls)
				}
				if onErr != tt.wantOnErr {
					t.Errorf("OnError called %d times, want %d", onErr, tt.wantOnErr)
				}
				for i, g := range gaps[1:] {
					if hi := min(storageBackoffMin<<i, storageBackoffMax); g < hi/2 || g > hi {
						t.Errorf("wait before try %d = %v, want in [%v, %v]", i+2, g, hi/2, hi)
					}
				}
				if tt.stopAfter > 0 && time.Since(start) != tt.stopAfter {
					t.Errorf("persist() returned after %v, want %v (when ctx ended)", time.Since(start), tt.stopAfter)
				}
			})
		})
	}
}

// TestRunQueueRetriesFailingRelease has the release of a retried request's
// entry (RetryPolicy) fail a few times: the retry still happens once the
// storage takes the release, and the outage reaches OnError once.
func TestRunQueueRetriesFailingRelease(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		if r.URL.Path == "/flaky" && n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/flaky">flaky</a>`)
	}))
	defer srv.Close()
	logs := &syncBuffer{}
	c, se := newOutageCollector(t, logs)
	RetryPolicy(RetryOptions{BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond})(c)
	var final []error
	c.OnError(func(_ *Response, err error) {
		if !errors.Is(err, ErrStorageUnavailable) {
			mu.Lock()
			final = append(final, err)
			mu.Unlock()
		}
	})
	q := newFlakyQueue()
	q.fail["release"] = 3
	req, err := c.newRequest(srv.URL+"/", http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := req.Marshal()
	if err := q.MemoryQueue.Push(t.Context(), data); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.RunQueue(ctx, q, 2); err != nil {
		t.Fatalf("RunQueue() error = %v, want nil\n%s", err, logs)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/flaky"] != 2 {
		t.Errorf("/flaky fetched %d times, want 2 (the 503, then the retry)", hits["/flaky"])
	}
	// "/flaky" links to itself: the second fetch's link is refused as visited.
	for _, err := range final {
		var av *AlreadyVisitedError
		if !errors.As(err, &av) {
			t.Errorf("OnError got %v, want no failure but a revisit refusal", err)
		}
	}
	if got := se.ops(); len(got) != 1 || got[0] != "release" {
		t.Errorf("OnError storage errors = %v, want one for release", got)
	}
}

// TestOutagesFlapping checks that a storage that flaps while it comes back
// is one outage (one OnError), and that a failure after outageQuiet of
// calm is a new one.
func TestOutagesFlapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCollector()
		onErr := 0
		c.OnError(func(*Response, error) { onErr++ })
		o := newOutages(c)
		step := func(fail bool) {
			time.Sleep(time.Millisecond) // virtual time stands still between calls
			started := time.Now()
			time.Sleep(time.Millisecond)
			if fail {
				o.failed("push", 1, errFlaky, nil)
			} else {
				o.recovered("push", started)
			}
		}
		for _, fail := range []bool{true, false, true, false, true, false} {
			step(fail)
		}
		if onErr != 1 {
			t.Fatalf("OnError called %d times for a flapping outage, want 1", onErr)
		}
		time.Sleep(outageQuiet)
		step(true)
		if onErr != 2 {
			t.Errorf("OnError called %d times after a new outage, want 2", onErr)
		}
		// A success that was in flight when the failure came does not end it.
		started := time.Now().Add(-time.Second)
		o.recovered("push", started)
		if o.down.Load() != 1 {
			t.Errorf("an older success ended the outage: %d kinds down, want 1", o.down.Load())
		}
	})
}
