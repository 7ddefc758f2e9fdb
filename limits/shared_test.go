package limits

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeShared is an in-memory Shared for several Gates in one test, on the
// virtual clock: what a Redis HostLimiter does across processes.
type fakeShared struct {
	// block, when not nil, makes Acquire wait for it to close (or ctx).
	block chan struct{}

	// mu guards everything below.
	mu       sync.Mutex
	next     map[string]time.Time
	inflight map[string]int
	calls    map[string]int
	released int
	failN    int // the next failN calls fail with errBoom
}

var errBoom = errors.New("shared store down")

func newFakeShared() *fakeShared {
	return &fakeShared{next: map[string]time.Time{}, inflight: map[string]int{}, calls: map[string]int{}}
}

func (f *fakeShared) Acquire(ctx context.Context, host string, delay time.Duration, par int) (func(), time.Duration, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[host]++
	if f.failN > 0 {
		f.failN--
		return nil, 0, errBoom
	}
	now := time.Now()
	if n := f.next[host]; n.After(now) {
		return nil, n.Sub(now), nil
	}
	if par > 0 && f.inflight[host] >= par {
		return nil, 5 * ms, nil
	}
	f.inflight[host]++
	if delay > 0 {
		f.next[host] = now.Add(delay)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.inflight[host]--
			f.released++
			f.mu.Unlock()
		})
	}, 0, nil
}

// crawlTogether runs qs through each gate at once, like one crawl per
// process, recording every start in one record.
func crawlTogether(t *testing.T, gates []*Gate[req], qs []req, workers int, lat time.Duration) *record {
	t.Helper()
	ctx := t.Context()
	rec := &record{
		starts: map[string][]time.Time{}, order: map[string][]int{},
		inflight: map[string]int{}, maxHost: map[string]int{},
	}
	errs := make(chan error, 2*len(gates))
	var wg sync.WaitGroup
	for _, g := range gates {
		wg.Go(func() {
			for _, q := range qs {
				if err := g.Put(ctx, q.host, q); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			var work sync.WaitGroup
			defer work.Wait()
			free := make(chan struct{}, workers)
			for range workers {
				free <- struct{}{}
			}
			for range qs {
				<-free
				q, tk, err := g.Get(ctx)
				if err != nil {
					errs <- err
					return
				}
				rec.start(q)
				work.Go(func() {
					<-time.After(lat)
					rec.end(q)
					tk.Done(Result{StatusCode: 200, Latency: lat})
					free <- struct{}{}
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("crawl error = %v, want nil", err)
	}
	return rec
}

func TestSharedAcrossGates(t *testing.T) {
	tests := []struct {
		name    string
		rule    func() *Rule // a fresh Rule per Gate, as each process makes its own
		lat     time.Duration
		shared  bool
		wantGap time.Duration // least gap between starts to one host, all gates together
		wantPar int           // most in flight to one host, all gates together
	}{
		{"delay", func() *Rule { return &Rule{DomainGlob: "*", Delay: 100 * ms, Parallelism: 1} }, 30 * ms, true, 100 * ms, 1},
		{"parallelism, slow server", func() *Rule { return &Rule{DomainGlob: "*", Delay: 10 * ms, Parallelism: 2} }, time.Second, true, 10 * ms, 2},
		{"random delay", func() *Rule { return &Rule{DomainGlob: "*", Delay: 50 * ms, RandomDelay: 50 * ms} }, 10 * ms, true, 50 * ms, 1},
		// Without Shared each Gate keeps the limits alone: three times the load.
		{"no shared state", func() *Rule { return &Rule{DomainGlob: "*", Delay: 100 * ms, Parallelism: 1} }, 30 * ms, false, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sh := newFakeShared()
				var gates []*Gate[req]
				for range 3 {
					var opts []Option
					if tt.shared {
						opts = append(opts, WithShared(sh, nil))
					}
					gates = append(gates, NewGate[req](newLimiter(t, opts, tt.rule()), 64))
				}
				rec := crawlTogether(t, gates, reqs(10, "a.com", "b.com"), 4, tt.lat)
				for _, h := range []string{"a.com", "b.com"} {
					if n := len(rec.starts[h]); n != 30 {
						t.Errorf("host %s: %d starts, want 30", h, n)
					}
					if got := rec.minGap(h); tt.shared && got < tt.wantGap {
						t.Errorf("host %s: least gap between starts = %v, want >= %v", h, got, tt.wantGap)
					} else if !tt.shared && got >= 100*ms {
						t.Errorf("host %s without Shared: least gap = %v, want < 100ms (the gates do not know each other)", h, got)
					}
					if got := rec.maxHost[h]; got != tt.wantPar {
						t.Errorf("host %s: most in flight = %d, want %d", h, got, tt.wantPar)
					}
				}
				if tt.shared {
					sh.mu.Lock()
					defer sh.mu.Unlock()
					if sh.released != 60 {
						t.Errorf("Shared slots released = %d, want 60 (one per start)", sh.released)
					}
				}
			})
		})
	}
}

func TestSharedWaitParksOnlyThatHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		sh := newFakeShared()
		sh.next["a.com"] = time.Now().Add(time.Second) // another process started a.com just now
		g := NewGate[req](newLimiter(t, []Option{WithShared(sh, nil)}, &Rule{DomainGlob: "a.com", Delay: 10 * ms}), 8)
		begin := time.Now()
		for _, q := range []req{{"a.com", 0}, {"b.com", 0}} {
			if err := g.Put(ctx, q.host, q); err != nil {
				t.Fatal(err)
			}
		}
		q, tk, err := g.Get(ctx)
		if err != nil || q.host != "b.com" || time.Since(begin) != 0 {
			t.Fatalf("first Get() = %v after %v, %v; want b.com at once", q, time.Since(begin), err)
		}
		tk.Done(Result{})
		q, tk, err = g.Get(ctx)
		if err != nil || q.host != "a.com" || time.Since(begin) != time.Second {
			t.Fatalf("second Get() = %v after %v, %v; want a.com after 1s", q, time.Since(begin), err)
		}
		tk.Done(Result{})
		tk.Done(Result{}) // only the first counts
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if n := sh.calls["b.com"]; n != 0 {
			t.Errorf("Shared asked about b.com (no rule) %d times, want 0", n)
		}
		if sh.released != 1 || sh.inflight["a.com"] != 0 {
			t.Errorf("after Done twice: released %d, in flight %d; want 1, 0", sh.released, sh.inflight["a.com"])
		}
	})
}

func TestSharedErrorHoldsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		sh := newFakeShared()
		sh.failN = 2
		var mu sync.Mutex
		var got []error
		onErr := func(host string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if host != "a.com" {
				t.Errorf("onError host = %q, want a.com", host)
			}
			got = append(got, err)
		}
		g := NewGate[req](newLimiter(t, []Option{WithShared(sh, onErr)}, &Rule{DomainGlob: "*", Parallelism: 1}), 8)
		begin := time.Now()
		if err := g.Put(ctx, "a.com", req{"a.com", 0}); err != nil {
			t.Fatal(err)
		}
		_, tk, err := g.Get(ctx)
		if err != nil {
			t.Fatalf("Get() error = %v, want nil", err)
		}
		tk.Done(Result{})
		if el := time.Since(begin); el != 2*SharedBackoff {
			t.Errorf("Get() after two Shared errors took %v, want %v", el, 2*SharedBackoff)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 || !errors.Is(got[0], errBoom) || !errors.Is(got[1], errBoom) {
			t.Errorf("onError got %v, want errBoom twice", got)
		}
		if n := g.Stats().SharedErrors; n != 2 {
			t.Errorf("Stats().SharedErrors = %d, want 2", n)
		}
	})
}

func TestSharedInterrupted(t *testing.T) {
	t.Run("Close while asking", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sh := newFakeShared()
			sh.block = make(chan struct{})
			g := NewGate[req](newLimiter(t, []Option{WithShared(sh, nil)}, &Rule{DomainGlob: "*", Delay: ms}), 8)
			if err := g.Put(t.Context(), "a.com", req{"a.com", 0}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := g.Get(t.Context())
				done <- err
			}()
			synctest.Wait() // Get is inside Acquire
			if left := g.Close(); len(left) != 1 {
				t.Errorf("Close() returned %v, want the item being asked about", left)
			}
			close(sh.block)
			if err := <-done; !errors.Is(err, ErrClosed) {
				t.Errorf("Get() error = %v, want %v", err, ErrClosed)
			}
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if sh.inflight["a.com"] != 0 {
				t.Errorf("Shared slot kept after Close: in flight %d, want 0", sh.inflight["a.com"])
			}
		})
	})
	t.Run("context ends while asking", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sh := newFakeShared()
			sh.block = make(chan struct{})
			g := NewGate[req](newLimiter(t, []Option{WithShared(sh, nil)}, &Rule{DomainGlob: "*", Delay: ms}), 8)
			if err := g.Put(t.Context(), "a.com", req{"a.com", 0}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if _, _, err := g.Get(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Get() error = %v, want %v", err, context.DeadlineExceeded)
			}
			if n := g.Stats().SharedErrors; n != 0 {
				t.Errorf("Stats().SharedErrors = %d after a cancelled Get, want 0", n)
			}
			close(sh.block)
			q, tk, err := g.Get(t.Context())
			if err != nil || q.host != "a.com" {
				t.Fatalf("Get() after the cancelled one = %v, %v, want a.com", q, err)
			}
			tk.Done(Result{})
		})
	})
}
