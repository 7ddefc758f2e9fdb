package scheduler

import (
	"errors"
	"sync"
	"testing"
)

func TestSNGenerator(t *testing.T) {
	if _, err := NewSNGenerator(5, 4); !errors.Is(err, ErrInvalidSN) {
		t.Errorf("NewSNGenerator(5, 4) error = %v, want %v", err, ErrInvalidSN)
	}
	g, err := NewSNGenerator(3, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{3, 4, 5, 3, 4, 5, 3}
	for i, w := range want {
		if got := g.Next(); got != w {
			t.Errorf("Next() before Get #%d = %d, want %d", i, got, w)
		}
		if got := g.Get(); got != w {
			t.Errorf("Get() #%d = %d, want %d", i, got, w)
		}
	}
	if g.CycleCount() != 2 || g.Start() != 3 || g.Max() != 5 {
		t.Errorf("CycleCount, Start, Max = %d, %d, %d; want 2, 3, 5", g.CycleCount(), g.Start(), g.Max())
	}
}

func TestSNGeneratorConcurrent(t *testing.T) {
	g, _ := NewSNGenerator(1, 1000)
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 250 {
				sn := g.Get()
				mu.Lock()
				if seen[sn] {
					t.Errorf("Get() returned %d twice", sn)
				}
				seen[sn] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 1000 || g.CycleCount() != 1 {
		t.Errorf("got %d distinct serials, cycle %d; want 1000, 1", len(seen), g.CycleCount())
	}
}
