package buffer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

// fillToMax grows p to its max with TryPut and empties it again with TryGet
// calls that stop before the pool starts shrinking.
func fillToMax(t *testing.T, p *Pool[int]) {
	t.Helper()
	for i := 0; p.BufferNumber() < p.MaxBufferNumber(); i++ {
		if _, err := p.TryPut(i); err != nil {
			t.Fatalf("TryPut(%d) error = %v", i, err)
		}
	}
	for p.Total() > 0 {
		if _, ok, err := p.TryGet(); !ok || err != nil {
			t.Fatalf("TryGet() = %v, %v with Total() = %d, want an item", ok, err, p.Total())
		}
	}
}

// bufferLens returns each live buffer's length in ring order.
func bufferLens(p *Pool[int]) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	lens := make([]int, 0, p.n)
	for i := range p.n {
		lens = append(lens, p.ring[(p.head+i)%len(p.ring)].Len())
	}
	return lens
}

// TestPoolSpreadsItems checks the double-layer rotation: a buffer just used
// goes to the back, so consecutive puts land in different buffers.
func TestPoolSpreadsItems(t *testing.T) {
	const bufCap, maxBuf = 4, 3
	p, _ := NewPool[int](bufCap, maxBuf)
	fillToMax(t, p)
	if n := p.BufferNumber(); n != maxBuf {
		t.Fatalf("BufferNumber() = %d after growth, want %d", n, maxBuf)
	}
	for i := range maxBuf {
		if err := p.Put(t.Context(), i); err != nil {
			t.Fatalf("Put(%d) error = %v", i, err)
		}
	}
	for i, n := range bufferLens(p) {
		if n != 1 {
			t.Errorf("buffer %d holds %d items after %d puts, want 1 each: %v", i, n, maxBuf, bufferLens(p))
		}
	}
	p.Close()
}

// TestPoolShrinkKeepsOne checks that endless gets on an empty pool retire
// buffers down to exactly one and never below.
func TestPoolShrinkKeepsOne(t *testing.T) {
	p, _ := NewPool[int](2, 5)
	fillToMax(t, p)
	for range 10000 {
		if _, ok, err := p.TryGet(); ok || err != nil {
			t.Fatalf("TryGet() on empty pool = %v, %v, want false, nil", ok, err)
		}
	}
	if n, s := p.BufferNumber(), p.Shrunk(); n != 1 || s != 4 {
		t.Errorf("BufferNumber() = %d, Shrunk() = %d, want 1, 4", n, s)
	}
	// The survivor still works.
	if err := p.Put(t.Context(), 7); err != nil {
		t.Fatalf("Put(7) error = %v", err)
	}
	if v, err := p.Get(t.Context()); v != 7 || err != nil {
		t.Errorf("Get() = %d, %v, want 7, nil", v, err)
	}
	p.Close()
}

// TestPoolCancelledWaiterKeepsWakeups cancels one of two sleeping getters
// (and putters) and checks the other is still woken by the next put (get).
func TestPoolCancelledWaiterKeepsWakeups(t *testing.T) {
	for range 20 { // select order is random: give it several chances to go wrong
		synctest.Test(t, func(t *testing.T) {
			p, _ := NewPool[int](1, 1)
			ctx, cancel := context.WithCancel(t.Context())
			results := make(chan error, 2)
			var wg sync.WaitGroup
			wg.Go(func() { _, err := p.Get(ctx); results <- err })
			wg.Go(func() { _, err := p.Get(t.Context()); results <- err })
			synctest.Wait()
			cancel()
			if err := p.Put(t.Context(), 1); err != nil {
				t.Fatalf("Put(1) error = %v", err)
			}
			wg.Wait() // hangs (and synctest reports deadlock) on a lost wake-up
			close(results)
			var got, cancelled int
			for err := range results {
				switch {
				case err == nil:
					got++
				case errors.Is(err, context.Canceled):
					cancelled++
				default:
					t.Errorf("Get() error = %v, want nil or %v", err, context.Canceled)
				}
			}
			if got != 1 || cancelled != 1 {
				t.Errorf("getters: %d got the item, %d cancelled; want 1, 1", got, cancelled)
			}

			// Now putters asleep on the full pool.
			if err := p.Put(t.Context(), 2); err != nil {
				t.Fatalf("Put(2) error = %v", err)
			}
			ctx, cancel = context.WithCancel(t.Context())
			results = make(chan error, 2)
			wg.Go(func() { results <- p.Put(ctx, 2) })
			wg.Go(func() { results <- p.Put(t.Context(), 3) })
			synctest.Wait()
			cancel()
			if _, err := p.Get(t.Context()); err != nil {
				t.Fatalf("Get() error = %v", err)
			}
			wg.Wait()
			close(results)
			got, cancelled = 0, 0
			for err := range results {
				switch {
				case err == nil:
					got++
				case errors.Is(err, context.Canceled):
					cancelled++
				default:
					t.Errorf("Put() error = %v, want nil or %v", err, context.Canceled)
				}
			}
			if got != 1 || cancelled != 1 || p.Total() != 1 {
				t.Errorf("putters: %d put, %d cancelled, Total() = %d; want 1, 1, 1", got, cancelled, p.Total())
			}
			p.Close()
		})
	}
}

// TestPoolCloseUnderLoad closes the pool while producers and consumers are
// busy and checks every item put is either got or handed back by Close.
func TestPoolCloseUnderLoad(t *testing.T) {
	p, _ := NewPool[int](4, 4)
	const producers, consumers, perProducer = 4, 3, 2000
	var mu sync.Mutex // guards putN, gotN
	putN := make(map[int]int)
	gotN := make(map[int]int)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			for j := range perProducer {
				v := i*perProducer + j
				var err error
				if j%2 == 0 {
					err = p.Put(context.Background(), v)
				} else {
					var ok bool
					if ok, err = p.TryPut(v); err == nil && !ok {
						continue
					}
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Put(%d) error = %v", v, err)
					return
				}
				mu.Lock()
				putN[v]++
				mu.Unlock()
			}
		})
	}
	busy := make(chan struct{}) // closed once consumers have got a good share
	var busyOnce sync.Once
	for range consumers {
		wg.Go(func() {
			for k := 0; ; k++ {
				var v int
				var err error
				if k%3 == 0 {
					var ok bool
					if v, ok, err = p.TryGet(); err == nil && !ok {
						continue
					}
				} else {
					v, err = p.Get(context.Background())
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Get() error = %v", err)
					return
				}
				mu.Lock()
				gotN[v]++
				if len(gotN) == producers*perProducer/4 {
					busyOnce.Do(func() { close(busy) })
				}
				mu.Unlock()
			}
		})
	}
	<-busy
	left := p.Close()
	wg.Wait()
	for _, v := range left {
		gotN[v]++
	}
	if len(putN) == 0 {
		t.Fatal("no item was put before Close")
	}
	for v, n := range putN {
		if gotN[v] != n {
			t.Errorf("item %d put %d times, got or returned %d times", v, n, gotN[v])
		}
	}
	for v, n := range gotN {
		if putN[v] == 0 {
			t.Errorf("item %d got %d times, never put", v, n)
		}
	}
	if p.Total() != 0 {
		t.Errorf("Total() = %d after Close, want 0", p.Total())
	}
}
