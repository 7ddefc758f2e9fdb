package buffer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

func TestNewPoolInvalid(t *testing.T) {
	tests := []struct {
		name        string
		bufCap, max int
	}{
		{"zero cap", 0, 1},
		{"negative cap", -1, 1},
		{"zero max", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPool[int](tt.bufCap, tt.max); !errors.Is(err, ErrInvalidSize) {
				t.Errorf("NewPool(%d, %d) error = %v, want %v", tt.bufCap, tt.max, err, ErrInvalidSize)
			}
		})
	}
	if _, err := NewBuffer[int](0); !errors.Is(err, ErrInvalidSize) {
		t.Errorf("NewBuffer(0) error = %v, want %v", err, ErrInvalidSize)
	}
}

// TestPoolConservation runs many producers and consumers and checks that
// every item comes out exactly once.
func TestPoolConservation(t *testing.T) {
	tests := []struct {
		name                 string
		bufCap, max          int
		producers, consumers int
	}{
		{"1x1 single buffer", 1, 1, 1, 1},
		{"4x4 growable", 4, 8, 4, 4},
		{"8x2 tiny buffers", 1, 3, 8, 2},
		{"2x8 many consumers", 16, 4, 2, 8},
	}
	const perProducer = 5000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPool[int](tt.bufCap, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			total := tt.producers * perProducer
			seen := make([]int, total)
			var mu sync.Mutex // guards seen, maxSeen
			maxSeen := 0
			var prod, cons sync.WaitGroup
			errc := make(chan error, tt.producers+tt.consumers)
			for i := range tt.producers {
				prod.Go(func() {
					for j := range perProducer {
						if err := p.Put(ctx, i*perProducer+j); err != nil {
							errc <- err
							return
						}
					}
				})
			}
			remaining := make(chan struct{}, total)
			for range total {
				remaining <- struct{}{}
			}
			close(remaining)
			for range tt.consumers {
				cons.Go(func() {
					for range remaining {
						v, err := p.Get(ctx)
						if err != nil {
							errc <- err
							return
						}
						mu.Lock()
						seen[v]++
						maxSeen = max(maxSeen, p.BufferNumber())
						mu.Unlock()
					}
				})
			}
			prod.Wait()
			cons.Wait()
			close(errc)
			for err := range errc {
				t.Errorf("Put/Get error = %v", err)
			}
			for v, n := range seen {
				if n != 1 {
					t.Fatalf("item %d got %d times, want 1", v, n)
				}
			}
			if p.Total() != 0 {
				t.Errorf("Total() = %d after all gets, want 0", p.Total())
			}
			if maxSeen > tt.max || p.BufferNumber() < 1 {
				t.Errorf("BufferNumber went to %d (now %d), want within [1, %d]", maxSeen, p.BufferNumber(), tt.max)
			}
			if left := p.Close(); len(left) != 0 {
				t.Errorf("Close() returned %d items, want 0", len(left))
			}
		})
	}
}

func TestPoolGrowAndShrink(t *testing.T) {
	const bufCap, maxBuf = 2, 3
	p, err := NewPool[int](bufCap, maxBuf)
	if err != nil {
		t.Fatal(err)
	}
	// Keep offering items: full buffers count failures until the pool grows,
	// and it must stop at maxBuf.
	put := 0
	for range 1000 {
		ok, err := p.TryPut(put)
		if err != nil {
			t.Fatalf("TryPut(%d) error = %v", put, err)
		}
		if ok {
			put++
		}
		if n := p.BufferNumber(); n > maxBuf {
			t.Fatalf("BufferNumber() = %d, want <= %d", n, maxBuf)
		}
	}
	if p.BufferNumber() != maxBuf || p.Grown() != maxBuf-1 {
		t.Errorf("BufferNumber() = %d, Grown() = %d; want %d, %d", p.BufferNumber(), p.Grown(), maxBuf, maxBuf-1)
	}
	if put != bufCap*maxBuf || p.Total() != put {
		t.Errorf("put %d items, Total() = %d; want %d", put, p.Total(), bufCap*maxBuf)
	}
	got := 0
	for range 1000 {
		_, ok, err := p.TryGet()
		if err != nil {
			t.Fatalf("TryGet() error = %v", err)
		}
		if ok {
			got++
		}
		if p.BufferNumber() < 1 {
			t.Fatalf("BufferNumber() = %d, want >= 1", p.BufferNumber())
		}
	}
	if got != put || p.Total() != 0 {
		t.Errorf("got %d items, Total() = %d; want %d, 0", got, p.Total(), put)
	}
	if p.BufferNumber() != 1 || p.Shrunk() != maxBuf-1 {
		t.Errorf("after empty gets BufferNumber() = %d, Shrunk() = %d; want 1, %d", p.BufferNumber(), p.Shrunk(), maxBuf-1)
	}
}

// TestPoolCloseReleasesBlocked blocks getters on an empty pool and putters on
// a full one, closes both, and checks every call returns ErrClosed and no
// item is lost.
func TestPoolCloseReleasesBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		empty, _ := NewPool[int](1, 1)
		full, _ := NewPool[int](1, 1)
		if err := full.Put(t.Context(), 42); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 2*n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := empty.Get(context.Background())
				errc <- err
			})
			wg.Go(func() { errc <- full.Put(context.Background(), i) })
		}
		synctest.Wait() // every caller is durably blocked, not spinning
		if left := empty.Close(); len(left) != 0 {
			t.Errorf("empty.Close() = %v, want none", left)
		}
		if left := full.Close(); len(left) != 1 || left[0] != 42 {
			t.Errorf("full.Close() = %v, want [42]", left)
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("blocked call error = %v, want %v", err, ErrClosed)
			}
		}
		if left := full.Close(); left != nil {
			t.Errorf("second Close() = %v, want nil", left)
		}
		if err := full.Put(t.Context(), 1); !errors.Is(err, ErrClosed) {
			t.Errorf("Put after Close error = %v, want %v", err, ErrClosed)
		}
		if _, err := full.Get(t.Context()); !errors.Is(err, ErrClosed) {
			t.Errorf("Get after Close error = %v, want %v", err, ErrClosed)
		}
	})
}

func TestPoolContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := NewPool[int](1, 1)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 2)
		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := p.Get(ctx)
			errc <- err
		})
		synctest.Wait()
		cancel()
		wg.Wait()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Get(cancelled) error = %v, want %v", err, context.Canceled)
		}
		_ = p.Put(t.Context(), 1)
		if err := p.Put(ctx, 2); !errors.Is(err, context.Canceled) {
			t.Errorf("Put(cancelled, full) error = %v, want %v", err, context.Canceled)
		}
		p.Close()
	})
}

// TestPoolBlockedWakes checks that a sleeping getter is woken by a put and a
// sleeping putter by a get: no lost wake-ups among several sleepers.
func TestPoolBlockedWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := NewPool[int](1, 2)
		const n = 20
		got := make(chan int, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				v, err := p.Get(t.Context())
				if err != nil {
					t.Errorf("Get() error = %v", err)
					return
				}
				got <- v
			})
		}
		synctest.Wait()
		for i := range n {
			if err := p.Put(t.Context(), i); err != nil {
				t.Fatalf("Put(%d) error = %v", i, err)
			}
		}
		wg.Wait()
		if len(got) != n {
			t.Errorf("%d getters woke, want %d", len(got), n)
		}
		// Now the other way round: putters asleep on a full pool.
		for i := range 2 * n {
			wg.Go(func() {
				if err := p.Put(t.Context(), i); err != nil {
					t.Errorf("Put() error = %v", err)
				}
			})
		}
		synctest.Wait()
		for range 2 * n {
			if _, err := p.Get(t.Context()); err != nil {
				t.Fatalf("Get() error = %v", err)
			}
		}
		wg.Wait()
		if p.Total() != 0 {
			t.Errorf("Total() = %d, want 0", p.Total())
		}
		p.Close()
	})
}
