package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
)

// runWithin runs q.Run(c) and fails the test if it does not return within d.
func runWithin(t *testing.T, q *queue.Queue, c *magpie.Collector, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- q.Run(c) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Run did not return within %v", d)
		return nil
	}
}

func mustNew(t *testing.T, threads int, s queue.Storage) *queue.Queue {
	t.Helper()
	q, err := queue.New(threads, s)
	if err != nil {
		t.Fatalf("New(%d, %v) error = %v, want nil", threads, s, err)
	}
	return q
}

func mustAddURL(t *testing.T, q *queue.Queue, u string) {
	t.Helper()
	if err := q.AddURL(u); err != nil {
		t.Fatalf("AddURL(%q) error = %v, want nil", u, err)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		threads int
		s       queue.Storage
		wantErr error
	}{
		{"default storage", 2, nil, nil},
		{"given storage", 1, &queue.InMemoryQueueStorage{MaxSize: 5}, nil},
		{"zero threads", 0, nil, queue.ErrInvalidThreads},
		{"negative threads", -3, nil, queue.ErrInvalidThreads},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := queue.New(tt.threads, tt.s)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New(%d) error = %v, want %v", tt.threads, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if q.Threads != tt.threads {
				t.Errorf("Threads = %d, want %d", q.Threads, tt.threads)
			}
			if tt.s == nil {
				m, ok := q.Storage().(*queue.InMemoryQueueStorage)
				if !ok || m.MaxSize != queue.DefaultMaxSize {
					t.Errorf("default Storage() = %#v, want InMemoryQueueStorage{MaxSize: %d}", q.Storage(), queue.DefaultMaxSize)
				}
			}
		})
	}
}

func TestNewCallsInit(t *testing.T) {
	bad := errors.New("init failed")
	if _, err := queue.New(1, queue.FromColly(&collyList{})); err != nil {
		t.Fatalf("New(FromColly) error = %v, want nil", err)
	}
	if _, err := queue.New(1, queue.FromColly(&failInit{err: bad})); !errors.Is(err, bad) {
		t.Fatalf("New(storage whose Init fails) error = %v, want %v", err, bad)
	}
}

type failInit struct {
	collyList
	err error
}

func (f *failInit) Init() error { return f.err }

func TestAddURLSizeIsEmpty(t *testing.T) {
	q := mustNew(t, 1, nil)
	if !q.IsEmpty() {
		t.Fatalf("IsEmpty() of a new queue = false, want true")
	}
	mustAddURL(t, q, "http://127.0.0.1/a")
	mustAddURL(t, q, "http://127.0.0.1/b")
	if n, err := q.Size(); n != 2 || err != nil {
		t.Errorf("Size() = %d, %v; want 2, nil", n, err)
	}
	if q.IsEmpty() {
		t.Errorf("IsEmpty() with 2 requests = true, want false")
	}
	if err := q.AddURL("http://[::1"); err == nil {
		t.Errorf("AddURL(invalid) error = nil, want a parse error")
	}
	if err := q.AddRequest(nil); err == nil {
		t.Errorf("AddRequest(nil) error = nil, want an error")
	}
}

func TestAddURLQueueFull(t *testing.T) {
	q := mustNew(t, 1, &queue.InMemoryQueueStorage{MaxSize: 1})
	mustAddURL(t, q, "http://127.0.0.1/a")
	if err := q.AddURL("http://127.0.0.1/b"); !errors.Is(err, queue.ErrQueueFull) {
		t.Fatalf("AddURL() beyond MaxSize error = %v, want %v", err, queue.ErrQueueFull)
	}
	if err := q.AddURL("http://127.0.0.1/b"); err.Error() != "Queue MaxSize reached" {
		t.Errorf("ErrQueueFull text = %q, want Colly's", err)
	}
}

func TestAddURLDecodes(t *testing.T) {
	q := mustNew(t, 1, nil)
	mustAddURL(t, q, "http://127.0.0.1/a?b=1")
	es, err := q.Storage().Lease(t.Context(), 1, time.Minute)
	if err != nil {
		t.Fatalf("Lease() error = %v, want nil", err)
	}
	r, err := magpie.NewCollector().UnmarshalRequest(es[0].Data)
	if err != nil {
		t.Fatalf("UnmarshalRequest(AddURL entry) error = %v, want nil", err)
	}
	if r.URL.String() != "http://127.0.0.1/a?b=1" || r.Method != "GET" || r.Depth != 1 {
		t.Errorf("AddURL entry = %s %s depth %d, want GET http://127.0.0.1/a?b=1 depth 1", r.Method, r.URL, r.Depth)
	}
}

func TestRunFetchesEverything(t *testing.T) {
	// Page n links to 2n+1 and 2n+2 below 200: a tree reached from page 0.
	s := newTestServer(t, func(n int) []int {
		var out []int
		for _, c := range []int{2*n + 1, 2*n + 2} {
			if c < 200 {
				out = append(out, c)
			}
		}
		return out
	})
	c := magpie.NewCollector()
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(href(e))
	})
	var depth1 atomic.Int32
	c.OnRequest(func(r *magpie.Request) {
		if r.URL.Path == "/p/0" && r.Depth == 1 {
			depth1.Add(1)
		}
	})
	q := mustNew(t, 4, nil)
	mustAddURL(t, q, s.page(0))
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	f := s.fetches()
	if len(f) != 200 {
		t.Errorf("fetched %d distinct pages, want 200", len(f))
	}
	for p, n := range f {
		if n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
	if depth1.Load() != 1 {
		t.Errorf("AddURL request seen at depth 1 %d times, want 1 (AddURL starts at depth 1)", depth1.Load())
	}
	if !q.IsEmpty() {
		t.Errorf("IsEmpty() after Run = false, want true")
	}
}

func TestRunMaxDepth(t *testing.T) {
	s := newTestServer(t, func(n int) []int { return []int{n + 1} })
	c := magpie.NewCollector(magpie.MaxDepth(2))
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(href(e)) })
	q := mustNew(t, 2, nil)
	mustAddURL(t, q, s.page(0))
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	// Depth 1 is /p/0, depth 2 is /p/1; /p/2 would be depth 3.
	if f := s.fetches(); len(f) != 2 || f["/p/0"] != 1 || f["/p/1"] != 1 {
		t.Errorf("fetches with MaxDepth(2) = %v, want /p/0 and /p/1 once", f)
	}
}

func TestRunMaxRequests(t *testing.T) {
	s := newTestServer(t, nil)
	c := magpie.NewCollector(magpie.MaxRequests(10))
	var refused atomic.Int32
	c.OnRefused(func(_ *magpie.Request, err error) {
		if errors.Is(err, magpie.ErrMaxRequests) {
			refused.Add(1)
		}
	})
	q := mustNew(t, 4, nil)
	for i := range 50 {
		mustAddURL(t, q, s.page(i))
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	if n := s.total(); n != 10 {
		t.Errorf("server hits with MaxRequests(10) = %d, want 10", n)
	}
	// The budget stops the leasing: the other 40 are neither refused nor
	// deleted, and wait in the queue for a later run.
	if n := refused.Load(); n != 0 {
		t.Errorf("OnRefused(ErrMaxRequests) calls = %d, want 0", n)
	}
	if n, err := q.Size(); err != nil || n != 40 {
		t.Errorf("Size() after Run = %d, %v, want 40", n, err)
	}
	if err := runWithin(t, q, magpie.NewCollector(), 30*time.Second); err != nil {
		t.Fatalf("second Run() error = %v, want nil", err)
	}
	if n := s.total(); n != 50 {
		t.Errorf("server hits after a second run = %d, want 50", n)
	}
}

func TestRunUndecodableEntries(t *testing.T) {
	s := newTestServer(t, nil)
	c := magpie.NewCollector()
	st := &queue.InMemoryQueueStorage{}
	q := mustNew(t, 2, st)
	mustAddURL(t, q, s.page(1))
	if err := st.Push(t.Context(), []byte("not json"), []byte(`{"URL":"::"}`)); err != nil {
		t.Fatalf("Push(garbage) error = %v, want nil", err)
	}
	mustAddURL(t, q, s.page(2))
	err := runWithin(t, q, c, 30*time.Second)
	if !errors.Is(err, magpie.ErrUndecodableRequest) {
		t.Errorf("Run() error = %v, want %v", err, magpie.ErrUndecodableRequest)
	}
	// Each bad entry is reported once: Run's error joins one error per entry.
	if n := countUndecodable(err); n != 2 {
		t.Errorf("Run() error reports %d undecodable entries, want 2: %v", n, err)
	}
	if n := s.total(); n != 2 {
		t.Errorf("server hits = %d, want 2 (the good entries still run)", n)
	}
	if !q.IsEmpty() {
		t.Errorf("IsEmpty() after Run = false, want true (bad entries are removed once reported)")
	}
}

func countUndecodable(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range j.Unwrap() {
			n += countUndecodable(e)
		}
		return n
	}
	if errors.Is(err, magpie.ErrUndecodableRequest) {
		return 1
	}
	return 0
}

func TestRunAgainAndAddAfterRun(t *testing.T) {
	s := newTestServer(t, nil)
	c := magpie.NewCollector()
	q := mustNew(t, 2, nil)
	mustAddURL(t, q, s.page(1))
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("first Run() error = %v, want nil", err)
	}
	added := make(chan error, 1)
	go func() { added <- q.AddURL(s.page(2)) }() // Colly blocks here forever
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("AddURL after Run error = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("AddURL after Run blocked")
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("second Run() error = %v, want nil", err)
	}
	if f := s.fetches(); len(f) != 2 || f["/p/1"] != 1 || f["/p/2"] != 1 {
		t.Errorf("fetches = %v, want /p/1 and /p/2 once each", f)
	}
}

func TestRunAsyncCollectorWaits(t *testing.T) {
	s := newTestServer(t, nil)
	c := magpie.NewCollector(magpie.Async())
	q := mustNew(t, 2, nil)
	for i := range 20 {
		mustAddURL(t, q, s.page(i))
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	if n := s.total(); n != 20 {
		t.Errorf("pages fetched when Run returned = %d, want 20", n)
	}
}

func TestRunConcurrentRunIsAnError(t *testing.T) {
	s := newTestServer(t, nil)
	s.block = make(chan struct{})
	s.entered = make(chan struct{}, 1)
	c := magpie.NewCollector()
	q := mustNew(t, 1, nil)
	mustAddURL(t, q, s.page(1))
	first := make(chan error, 1)
	go func() { first <- q.Run(c) }()
	<-s.entered // the first Run is fetching
	if err := q.Run(c); !errors.Is(err, queue.ErrRunning) {
		t.Errorf("second concurrent Run() error = %v, want %v", err, queue.ErrRunning)
	}
	close(s.block)
	select {
	case err := <-first:
		if err != nil {
			t.Errorf("first Run() error = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("first Run did not return")
	}
}

func TestRunNilCollector(t *testing.T) {
	q := mustNew(t, 1, nil)
	if err := q.Run(nil); !errors.Is(err, queue.ErrNilCollector) {
		t.Errorf("Run(nil) error = %v, want %v", err, queue.ErrNilCollector)
	}
}

func TestStop(t *testing.T) {
	base := runtime.NumGoroutine()
	s := newTestServer(t, nil)
	s.block = make(chan struct{})
	s.entered = make(chan struct{}, 100)
	c := magpie.NewCollector()
	const threads, total = 2, 50
	q := mustNew(t, threads, nil)
	for i := range total {
		mustAddURL(t, q, s.page(i))
	}
	done := make(chan error, 1)
	go func() { done <- q.Run(c) }()
	for range threads {
		<-s.entered
	}
	stopped := make(chan struct{})
	go func() { q.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatalf("Stop did not return promptly")
	}
	close(s.block) // let the in-flight requests finish
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() after Stop error = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after Stop")
	}
	// In-flight requests either finished (and left the storage) or were
	// cancelled and released back to it.
	fetched := s.total()
	n, err := q.Size()
	if err != nil || n < total-fetched || n > total || n == 0 {
		t.Errorf("Size() after Stop = %d, %v; want between %d and %d (unfinished requests stay)", n, err, total-fetched, total)
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() after Stop error = %v, want nil", err)
	}
	f := s.fetches()
	if len(f) != total {
		t.Errorf("fetched %d distinct pages after resuming, want %d (released requests must run again)", len(f), total)
	}
	for p, n := range f {
		if n > 2 {
			t.Errorf("%s fetched %d times, want 1 (2 if it was in flight at Stop)", p, n)
		}
	}
	// No goroutine outlives Run (client connections end with the server).
	s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if g := runtime.NumGoroutine(); g > base {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines after Stop = %d, want <= %d\n%s", g, base, buf[:runtime.Stack(buf, true)])
	}
}

func TestStopFromCallbackThenResume(t *testing.T) {
	s := newTestServer(t, nil)
	c := magpie.NewCollector()
	q := mustNew(t, 2, nil)
	var responses atomic.Int32
	c.OnResponse(func(*magpie.Response) {
		if responses.Add(1) == 5 {
			q.Stop()
		}
	})
	const total = 40
	for i := range total {
		mustAddURL(t, q, s.page(i))
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	if n := s.total(); n >= total {
		t.Fatalf("Stop from a callback fetched %d of %d, want fewer", n, total)
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() after Stop error = %v, want nil", err)
	}
	f := s.fetches()
	if len(f) != total {
		t.Errorf("fetched %d distinct pages after resuming, want %d", len(f), total)
	}
	for p, n := range f {
		if n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
}

// TestNoLoss seeds thousands of URLs, has callbacks add more at random during
// Run (both through the page links and with AddURL), and checks that every
// URL is fetched exactly once and that Run returns, many times over.
func TestNoLoss(t *testing.T) {
	rounds, seeds := 10, 3000
	if testing.Short() {
		rounds, seeds = 2, 1000
	}
	for round := range rounds {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			noLossRound(t, uint64(round), seeds)
		})
	}
}

func noLossRound(t *testing.T, seed uint64, seeds int) {
	// Pages below seeds link to three pages in [seeds, 2*seeds) chosen by a
	// hash, so links repeat; pages above link nowhere.
	link := func(n, k int) int { return seeds + int((uint64(n)*2654435761+uint64(k)*40503+seed)%uint64(seeds)) }
	s := newTestServer(t, func(n int) []int {
		if n >= seeds {
			return nil
		}
		return []int{link(n, 0), link(n, 1), link(n, 2)}
	})
	var (
		mu     sync.Mutex // guards want and r
		want   = make(map[string]bool)
		r      = rand.New(rand.NewPCG(seed, 7))
		addErr []error
	)
	for i := range seeds {
		want[fmt.Sprintf("/p/%d", i)] = true
		for k := range 3 {
			want[fmt.Sprintf("/p/%d", link(i, k))] = true
		}
	}
	threads := 8 + int(seed%3)
	q := mustNew(t, threads, nil)
	c := magpie.NewCollector()
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(href(e)) })
	c.OnResponse(func(*magpie.Response) {
		mu.Lock()
		defer mu.Unlock()
		if r.IntN(4) != 0 {
			return
		}
		n := 2*seeds + r.IntN(seeds) // pages only reachable this way
		want[fmt.Sprintf("/p/%d", n)] = true
		if err := q.AddURL(s.page(n)); err != nil {
			addErr = append(addErr, err)
		}
	})
	var onErr atomic.Int32
	c.OnError(func(_ *magpie.Response, err error) { onErr.Add(1) })
	c.OnRefused(func(_ *magpie.Request, err error) {
		var av *magpie.AlreadyVisitedError
		if !errors.As(err, &av) {
			onErr.Add(1)
		}
	})
	for i := range seeds {
		mustAddURL(t, q, s.page(i))
	}
	if err := runWithin(t, q, c, 60*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range addErr {
		t.Errorf("AddURL from a callback error = %v", err)
	}
	if n := onErr.Load(); n != 0 {
		t.Errorf("OnError or OnRefused called %d times for errors other than already-visited, want 0", n)
	}
	f := s.fetches()
	for p := range want {
		if f[p] != 1 {
			t.Errorf("%s fetched %d times, want 1", p, f[p])
		}
	}
	for p := range f {
		if !want[p] {
			t.Errorf("%s fetched but never added", p)
		}
	}
	if n, err := q.Size(); n != 0 || err != nil {
		t.Errorf("Size() after Run = %d, %v; want 0, nil", n, err)
	}
}

var _ storage.Queue = (*queue.InMemoryQueueStorage)(nil)

func TestRunContextCancelled(t *testing.T) {
	s := newTestServer(t, nil)
	s.block = make(chan struct{})
	s.entered = make(chan struct{}, 10)
	t.Cleanup(func() { close(s.block) })
	c := magpie.NewCollector()
	q := mustNew(t, 1, nil)
	for i := range 5 {
		mustAddURL(t, q, s.page(i))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- q.RunContext(ctx, c) }()
	<-s.entered
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RunContext() after cancel error = %v, want %v", err, context.Canceled)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("RunContext did not return after its context was cancelled")
	}
	if n, _ := q.Size(); n != 5 {
		t.Errorf("Size() after cancel = %d, want 5 (the cancelled request is released)", n)
	}
}

func TestRunWithCollyStorage(t *testing.T) {
	s := newTestServer(t, func(n int) []int {
		if n < 20 {
			return []int{n + 20}
		}
		return nil
	})
	c := magpie.NewCollector()
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(href(e)) })
	src := &collyList{}
	q := mustNew(t, 3, queue.FromColly(src))
	for i := range 20 {
		mustAddURL(t, q, s.page(i))
	}
	if n, _ := src.QueueSize(); n != 20 {
		t.Fatalf("Colly storage size after 20 AddURL = %d, want 20", n)
	}
	if err := runWithin(t, q, c, 30*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	f := s.fetches()
	if len(f) != 40 {
		t.Errorf("fetched %d distinct pages through a Colly storage, want 40", len(f))
	}
	for p, n := range f {
		if n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
}

// TestAddURLNotAbsolute: a URL no request could be sent to is an error at
// AddURL time (Colly and magpie until now returned nil and the request was
// lost), and nothing is stored.
func TestAddURLNotAbsolute(t *testing.T) {
	tests := []struct {
		u    string
		want error
	}{
		{"?n=0", magpie.ErrInvalidURL},
		{"/a/b", magpie.ErrInvalidURL},
		{"", magpie.ErrInvalidURL},
		{"example.com/a", magpie.ErrInvalidURL},
		{"http:///a", magpie.ErrMissingURL},
		{"https://:443/a", magpie.ErrMissingURL},
	}
	for _, tt := range tests {
		t.Run(tt.u, func(t *testing.T) {
			q := mustNew(t, 1, nil)
			if err := q.AddURL(tt.u); !errors.Is(err, tt.want) {
				t.Errorf("AddURL(%q) error = %v, want %v", tt.u, err, tt.want)
			}
			if n, err := q.Size(); n != 0 || err != nil {
				t.Errorf("Size() after AddURL(%q) = %d, %v; want 0, nil", tt.u, n, err)
			}
		})
	}
	q := mustNew(t, 1, nil)
	r := &magpie.Request{URL: &url.URL{Path: "rel"}, Method: "GET", Ctx: magpie.NewContext()}
	if err := q.AddRequest(r); !errors.Is(err, magpie.ErrInvalidURL) {
		t.Errorf("AddRequest(relative URL) error = %v, want %v", err, magpie.ErrInvalidURL)
	}
}
