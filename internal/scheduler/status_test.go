package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// allowed lists, for each lifecycle call, the states it may start from.
var allowed = map[string]map[Status]bool{
	"Init":  {StatusUninitialized: true, StatusInitialized: true, StatusStopped: true},
	"Start": {StatusInitialized: true},
	"Stop":  {StatusStarted: true},
}

var allStatuses = []Status{StatusUninitialized, StatusInitializing, StatusInitialized,
	StatusStarting, StatusStarted, StatusStopping, StatusStopped}

// TestCheckTransitionEveryPair checks every (from, to) pair of states.
func TestCheckTransitionEveryPair(t *testing.T) {
	call := map[Status]string{StatusInitializing: "Init", StatusStarting: "Start", StatusStopping: "Stop"}
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				want := allowed[call[to]][from] // only the -ing states are entered by a call
				err := checkTransition(from, to)
				if (err == nil) != want {
					t.Fatalf("checkTransition(%s, %s) error = %v, want allowed=%v", from, to, err, want)
				}
				if err != nil {
					var te *TransitionError
					if !errors.As(err, &te) || te.From != from || te.To != to || !errors.Is(err, ErrIllegalTransition) {
						t.Errorf("checkTransition(%s, %s) error = %#v, want *TransitionError{%s, %s} wrapping ErrIllegalTransition", from, to, err, from, to)
					}
				}
			})
		}
	}
}

// TestLifecycleCallsInEveryState puts a real scheduler in each state and
// tries each lifecycle call on it.
func TestLifecycleCallsInEveryState(t *testing.T) {
	for _, from := range allStatuses {
		for _, call := range []string{"Init", "Start", "Stop"} {
			t.Run(fmt.Sprintf("%s/%s", call, from), func(t *testing.T) {
				s := schedulerIn(t, from)
				before := s.Status()
				var err error
				switch call {
				case "Init":
					err = s.Init(testArgs(), newTreeCrawl(1).modules(t, 1))
				case "Start":
					err = s.Start(t.Context())
				case "Stop":
					err = s.Stop()
				}
				if want := allowed[call][from]; (err == nil) != want {
					t.Fatalf("%s() in %s error = %v, want allowed=%v", call, from, err, want)
				}
				if err != nil {
					if !errors.Is(err, ErrIllegalTransition) {
						t.Errorf("%s() in %s error = %v, want %v", call, from, err, ErrIllegalTransition)
					}
					if s.Status() != before {
						t.Errorf("refused %s() changed status %s to %s", call, before, s.Status())
					}
				}
				// Leave nothing running.
				if s.Status() == StatusStarted {
					if err := s.Stop(); err != nil {
						t.Errorf("cleanup Stop() error = %v", err)
					}
				}
				if from == StatusStopping { // forced: really started underneath
					s.status.Store(int32(StatusStarted))
					_ = s.Stop()
				}
			})
		}
	}
}

// schedulerIn returns a scheduler in status st. The transitional states
// cannot be held from outside a call, so they are forced on a scheduler
// otherwise in the preceding state.
func schedulerIn(t *testing.T, st Status) *Scheduler[int, int, int] {
	t.Helper()
	s := New[int, int, int]()
	if st == StatusUninitialized {
		return s
	}
	if err := s.Init(testArgs(), newTreeCrawl(1).modules(t, 1)); err != nil {
		t.Fatalf("Init() error = %v", err)
	}
	switch st {
	case StatusInitializing, StatusStarting:
		s.status.Store(int32(st))
		return s
	case StatusInitialized:
		return s
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	switch st {
	case StatusStopping:
		s.status.Store(int32(st))
	case StatusStopped:
		if err := s.Stop(); err != nil {
			t.Fatalf("Stop() error = %v", err)
		}
	}
	return s
}

func TestStatusString(t *testing.T) {
	for i, want := range []string{"uninitialized", "initializing", "initialized", "starting", "started", "stopping", "stopped"} {
		if got := Status(i).String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", i, got, want)
		}
	}
	if got := Status(99).String(); got != "Status(99)" {
		t.Errorf("Status(99).String() = %q, want %q", got, "Status(99)")
	}
}
