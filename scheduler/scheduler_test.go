package scheduler

import (
	"errors"
	"testing"
)

func TestSyntheticCrawl(t *testing.T) {
	const n = 10000
	tc := newTreeCrawl(n)
	s := New[int, int, int]()
	if err := s.Init(RequestArgs[int]{Admit: tc.admit}, testArgs(), tc.modules(t, 3)); err != nil {
		t.Fatalf("Init() error = %v", err)
	}
	errs := drainErrors(s.Errors())
	if err := s.Start(t.Context(), 0); err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	if err := s.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() error = %v", err)
	}
	if !s.Idle() {
		t.Errorf("Idle() = false after Wait")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop() error = %v", err)
	}
	for _, err := range errs() {
		if !errors.Is(err, errDuplicate) {
			t.Errorf("unexpected error from Errors(): %v", err)
		}
	}
	if len(tc.downloads) != n {
		t.Errorf("downloaded %d distinct pages, want %d", len(tc.downloads), n)
	}
	for page, c := range tc.downloads {
		if c != 1 {
			t.Errorf("page %d downloaded %d times, want 1", page, c)
		}
	}
	if tc.items != n {
		t.Errorf("pipeline saw %d items, want %d", tc.items, n)
	}
	sum := s.Summary()
	if sum.Requests.Downloaded != n || sum.ItemsDone != n || sum.Left != (LeftCounts{}) {
		t.Errorf("Summary() = %+v, want %d downloaded and items done, nothing left", sum, n)
	}
	t.Log(sum)
}
