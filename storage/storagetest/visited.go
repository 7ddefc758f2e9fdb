package storagetest

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// RunVisited runs the conformance suite for a storage.VisitedSet. open must
// return a fresh, empty set on every call; the suite closes it when it is an
// io.Closer. Stores that also implement storage.Storage get IsVisited and
// Visited checked against AddVisited.
//
// Contract checked: AddVisited reports per ID, in order, whether this call
// added it (a duplicate within one call counts once); the whole uint64 range
// round-trips; RemoveVisited forgets IDs and ignores absent ones; 16
// goroutines racing to add the same IDs get exactly one true per ID; after
// Close, methods return ErrClosed.
func RunVisited(t *testing.T, open func(t *testing.T) storage.VisitedSet) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, v storage.VisitedSet)
	}{
		{"AddIfAbsent", visitedAddIfAbsent},
		{"Extremes", visitedExtremes},
		{"Empty", visitedEmpty},
		{"Remove", visitedRemove},
		{"CollyStorage", visitedCollyStorage},
		{"Race", visitedRace},
		{"Cancelled", visitedCancelled},
		{"Closed", visitedClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := open(t)
			t.Cleanup(func() { closeStore(t, v) })
			tt.run(t, v)
		})
	}
}

func visitedAddIfAbsent(t *testing.T, v storage.VisitedSet) {
	steps := []struct {
		ids  []uint64
		want []bool
	}{
		{[]uint64{1, 2, 3}, []bool{true, true, true}},
		{[]uint64{1, 2, 3}, []bool{false, false, false}},
		{[]uint64{4, 2, 5}, []bool{true, false, true}},
		{[]uint64{6, 6, 7, 6}, []bool{true, false, true, false}},
	}
	for _, s := range steps {
		got := mustAdd(t, v, s.ids...)
		if !slices.Equal(got, s.want) {
			t.Errorf("AddVisited(%v) = %v, want %v", s.ids, got, s.want)
		}
	}
}

func visitedExtremes(t *testing.T, v storage.VisitedSet) {
	ids := []uint64{0, 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64 - 1, math.MaxUint64}
	if got := mustAdd(t, v, ids...); !slices.Equal(got, []bool{true, true, true, true, true, true}) {
		t.Fatalf("AddVisited(%v) = %v, want all true", ids, got)
	}
	for _, id := range ids {
		if got := mustAdd(t, v, id); !slices.Equal(got, []bool{false}) {
			t.Errorf("AddVisited(%d) again = %v, want [false]", id, got)
		}
	}
}

func visitedEmpty(t *testing.T, v storage.VisitedSet) {
	got, err := v.AddVisited(t.Context())
	if err != nil || len(got) != 0 {
		t.Errorf("AddVisited() = %v, %v; want [], nil", got, err)
	}
	if err := v.RemoveVisited(t.Context()); err != nil {
		t.Errorf("RemoveVisited() error = %v, want nil", err)
	}
}

func visitedRemove(t *testing.T, v storage.VisitedSet) {
	mustAdd(t, v, 1, 2, 3)
	if err := v.RemoveVisited(t.Context(), 2, 99, math.MaxUint64); err != nil {
		t.Fatalf("RemoveVisited(2, 99, max) error = %v, want nil", err)
	}
	if got := mustAdd(t, v, 1, 2, 3); !slices.Equal(got, []bool{false, true, false}) {
		t.Errorf("AddVisited(1, 2, 3) after removing 2 = %v, want [false true false]", got)
	}
}

func visitedCollyStorage(t *testing.T, v storage.VisitedSet) {
	s, ok := v.(storage.Storage)
	if !ok {
		t.Skipf("%T does not implement storage.Storage", v)
	}
	if err := s.Init(); err != nil {
		t.Fatalf("Init() error = %v, want nil", err)
	}
	mustAdd(t, v, 10)
	if err := s.Visited(11); err != nil {
		t.Fatalf("Visited(11) error = %v, want nil", err)
	}
	for _, tc := range []struct {
		id   uint64
		want bool
	}{{10, true}, {11, true}, {12, false}} {
		got, err := s.IsVisited(tc.id)
		if err != nil || got != tc.want {
			t.Errorf("IsVisited(%d) = %v, %v; want %v, nil", tc.id, got, err, tc.want)
		}
	}
	if got := mustAdd(t, v, 11); !slices.Equal(got, []bool{false}) {
		t.Errorf("AddVisited(11) after Visited(11) = %v, want [false]", got)
	}
	if err := s.Init(); err != nil {
		t.Fatalf("second Init() error = %v, want nil", err)
	}
	if got, err := s.IsVisited(10); err != nil || !got {
		t.Errorf("IsVisited(10) after a second Init = %v, %v; want true, nil", got, err)
	}
}

// visitedRace has 16 goroutines add the same IDs in different orders and
// batch sizes: exactly one of them may be told it added each ID.
func visitedRace(t *testing.T, v storage.VisitedSet) {
	const (
		workers = 16
		ids     = 500
	)
	ctx := t.Context()
	var (
		mu    sync.Mutex // guards added and errs
		added = make(map[uint64]int)
		errs  []error
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 42))
			order := r.Perm(ids)
			for i := 0; i < len(order); {
				n := min(1+r.IntN(16), len(order)-i)
				batch := make([]uint64, n)
				for j := range batch {
					// Spread IDs over the whole range, high bit included.
					batch[j] = uint64(order[i+j]) * 0x9e3779b97f4a7c15
				}
				i += n
				got, err := v.AddVisited(ctx, batch...)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if len(got) != len(batch) {
					errs = append(errs, errors.New("AddVisited returned a result of the wrong length"))
				} else {
					for j, ok := range got {
						if ok {
							added[batch[j]]++
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("AddVisited() error = %v", err)
	}
	if len(added) != ids {
		t.Errorf("%d IDs reported added at least once, want %d", len(added), ids)
	}
	for id, n := range added {
		if n != 1 {
			t.Errorf("ID %d reported added %d times, want 1", id, n)
		}
	}
}

func visitedCancelled(t *testing.T, v storage.VisitedSet) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := v.AddVisited(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("AddVisited(cancelled ctx) error = %v, want %v", err, context.Canceled)
	}
	if got := mustAdd(t, v, 1); !slices.Equal(got, []bool{true}) {
		t.Errorf("AddVisited(1) after a cancelled call = %v, want [true]", got)
	}
}

func visitedClosed(t *testing.T, v storage.VisitedSet) {
	c, ok := v.(io.Closer)
	if !ok {
		t.Skipf("%T does not implement io.Closer", v)
	}
	mustAdd(t, v, 1)
	if err := c.Close(); err != nil {
		t.Fatalf("Close() error = %v, want nil", err)
	}
	if _, err := v.AddVisited(t.Context(), 2); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("AddVisited() after Close error = %v, want %v", err, storage.ErrClosed)
	}
	if err := v.RemoveVisited(t.Context(), 1); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("RemoveVisited() after Close error = %v, want %v", err, storage.ErrClosed)
	}
	if s, ok := v.(storage.Storage); ok {
		if _, err := s.IsVisited(1); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("IsVisited() after Close error = %v, want %v", err, storage.ErrClosed)
		}
		if err := s.Visited(3); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("Visited() after Close error = %v, want %v", err, storage.ErrClosed)
		}
	}
}

func mustAdd(t *testing.T, v storage.VisitedSet, ids ...uint64) []bool {
	t.Helper()
	got, err := v.AddVisited(t.Context(), ids...)
	if err != nil {
		t.Fatalf("AddVisited(%v) error = %v, want nil", ids, err)
	}
	if len(got) != len(ids) {
		t.Fatalf("AddVisited(%v) returned %d results, want %d", ids, len(got), len(ids))
	}
	return got
}
