// Package runlink lets a queue.Queue hand the requests that AddURL and
// AddRequest receive during the Queue's own run to that run's frontier, which
// stores them with the links of the pages being crawled (one visited check
// and one push per batch) instead of one storage round trip each.
//
// The Queue owns a Sink and puts it in the context of the run (With); the
// run's frontier finds it there (From), attaches its add function while it
// runs and detaches it before it stores what it buffered and stops. Outside
// a run a Sink takes nothing and the Queue pushes at once.
package runlink

import (
	"context"
	"sync"
)

// Sink is the hand-over point between a Queue and the run using it. The
// zero value takes nothing. It is safe for concurrent use.
type Sink[R any] struct {
	// mu guards add: Add holds it for reading while add runs, so that
	// Detach returns only once no Add is inside the old function.
	mu  sync.RWMutex
	add func(R) error
}

// Attach makes Add pass requests to add until detach is called. A second
// Attach replaces the first.
func (s *Sink[R]) Attach(add func(R) error) (detach func()) {
	s.mu.Lock()
	s.add = add
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.add = nil
	}
}

// Add gives r to the attached run and reports whether one took it (with
// the run's error, if any); false means no run is attached and the caller
// stores r itself.
func (s *Sink[R]) Add(r R) (taken bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.add == nil {
		return false, nil
	}
	return true, s.add(r)
}

// ctxKey is the context key of a Sink of R.
type ctxKey[R any] struct{}

// With returns a copy of ctx carrying s.
func With[R any](ctx context.Context, s *Sink[R]) context.Context {
	return context.WithValue(ctx, ctxKey[R]{}, s)
}

// From returns the Sink that ctx carries, or nil.
func From[R any](ctx context.Context) *Sink[R] {
	s, _ := ctx.Value(ctxKey[R]{}).(*Sink[R])
	return s
}
