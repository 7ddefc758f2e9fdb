package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/magpiecrawl/magpie/internal/buffer"
)

// Scheduler runs requests through download, analyze and pipeline stages
// joined by buffer pools (see the package doc). Build it with New, then Init,
// Start, and finally Stop. It is safe for concurrent use.
type Scheduler[Req, Resp, Item any] struct {
	mu     sync.Mutex   // guards lifecycle transitions and run replacement
	status atomic.Int32 // a Status; written under mu, read freely
	run    atomic.Pointer[run[Req, Resp, Item]]
}

// New returns an uninitialized scheduler.
func New[Req, Resp, Item any]() *Scheduler[Req, Resp, Item] {
	return &Scheduler[Req, Resp, Item]{}
}

// Status returns the current lifecycle state.
func (s *Scheduler[Req, Resp, Item]) Status() Status { return Status(s.status.Load()) }

// begin moves to the transitional state to if the current state allows it,
// returning the state it left.
func (s *Scheduler[Req, Resp, Item]) begin(to Status) (Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := s.Status()
	if err := checkTransition(from, to); err != nil {
		return from, err
	}
	s.status.Store(int32(to))
	return from, nil
}

func (s *Scheduler[Req, Resp, Item]) set(st Status) {
	s.mu.Lock()
	s.status.Store(int32(st))
	s.mu.Unlock()
}

// Init checks the arguments, builds the pools and registers the modules. It
// is allowed when the scheduler is uninitialized, initialized or stopped; on
// error the status is left as it was. Errors wrap ErrInvalidArgs (naming the
// bad field), ErrDuplicateModule or ErrIllegalTransition.
func (s *Scheduler[Req, Resp, Item]) Init(da DataArgs, ma ModuleArgs[Req, Resp, Item]) error {
	from, err := s.begin(StatusInitializing)
	if err != nil {
		return err
	}
	if old := s.run.Load(); old != nil && old.stopAfter != nil {
		// A run stopped by its context finishes stopping in the watcher;
		// let it return before the run is replaced.
		<-old.afterDone
	}
	r, err := s.build(da, ma)
	if err != nil {
		s.set(from)
		return err
	}
	s.run.Store(r)
	s.set(StatusInitialized)
	return nil
}

func (s *Scheduler[Req, Resp, Item]) build(da DataArgs, ma ModuleArgs[Req, Resp, Item]) (*run[Req, Resp, Item], error) {
	for _, c := range []interface{ Check() error }{da, ma} {
		if err := c.Check(); err != nil {
			return nil, err
		}
	}
	r, err := newRun[Req, Resp, Item](da)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, m := range ma.Downloaders {
		mods = append(mods, m)
	}
	for _, m := range ma.Analyzers {
		mods = append(mods, m)
	}
	for _, m := range ma.Pipelines {
		mods = append(mods, m)
	}
	for _, m := range mods {
		if _, err := r.reg.Register(m); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidArgs, err)
		}
	}
	return r, nil
}

// Start launches the worker pools and returns at once; requests come in
// through Submit. The run ends on
// Stop, or when ctx is cancelled, which stops the scheduler as Stop would.
// Starting again after a stop needs Init again.
func (s *Scheduler[Req, Resp, Item]) Start(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgs)
	}
	if _, err := s.begin(StatusStarting); err != nil {
		return err
	}
	r := s.run.Load()
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.start()

	s.mu.Lock()
	r.stopAfter = context.AfterFunc(ctx, func() {
		defer close(r.afterDone)
		_ = s.stop(r)
	})
	s.status.Store(int32(StatusStarted))
	s.mu.Unlock()
	return nil
}

// Submit adds requests, blocking while the request pool is full. It must not
// be called from inside a module (a download worker blocked on its own full
// pool would stall the run). It gives up with ctx.Err() when ctx is done and
// returns ErrNotStarted unless the scheduler is started (or once it stops
// while Submit waits). Requests before the failing one were queued.
func (s *Scheduler[Req, Resp, Item]) Submit(ctx context.Context, reqs ...Req) error {
	r := s.run.Load()
	if r == nil || s.Status() != StatusStarted {
		return ErrNotStarted
	}
	for _, req := range reqs {
		if err := r.reqs.Put(ctx, req); err != nil {
			if errors.Is(err, buffer.ErrClosed) {
				return ErrNotStarted
			}
			return err
		}
		r.growDownload()
	}
	return nil
}

// Stop cancels in-flight work through the run's context, waits for every
// goroutine the scheduler started, and records in Leftovers the
// requests, responses and items still queued. It is allowed only when
// started; a run that its context stopped reports a *TransitionError, once
// its workers have exited.
func (s *Scheduler[Req, Resp, Item]) Stop() error {
	r := s.run.Load()
	if err := s.stop(r); err != nil {
		// The run may be stopping on its own, because its context ended:
		// wait for its workers before refusing, so that no module call is
		// still running when Stop returns, whoever stopped the run.
		if r != nil && r.shuttingDown.Load() {
			<-r.done
		}
		return err
	}
	if r.stopAfter() {
		close(r.afterDone) // the watcher will never run
	} else {
		// The watcher has started; it will find the run stopping and
		// return. Wait so it does not outlive Stop.
		<-r.afterDone
	}
	return nil
}

func (s *Scheduler[Req, Resp, Item]) stop(r *run[Req, Resp, Item]) error {
	s.mu.Lock()
	from := s.Status()
	if s.run.Load() != r || from != StatusStarted {
		s.mu.Unlock()
		return &TransitionError{From: from, To: StatusStopping}
	}
	s.status.Store(int32(StatusStopping))
	r.shuttingDown.Store(true)
	s.mu.Unlock()

	r.shutdown()
	r.runAfterStop()
	s.set(StatusStopped)
	r.closeErrors()
	close(r.done)
	return nil
}

// AfterStop registers f to run once the current run has stopped: after
// every worker has exited (no module call is running or will start), before
// Stop returns, whoever stopped the run (Stop or its context). Functions run
// in the order registered, on the goroutine that stops the run; f must not
// call Stop. AfterStop reports false, and does not keep f, when there is no
// run (before Init) or the run has already stopped. Safe for concurrent use, also from
// inside a module.
func (s *Scheduler[Req, Resp, Item]) AfterStop(f func()) bool {
	r := s.run.Load()
	if r == nil || f == nil {
		return false
	}
	r.afterMu.Lock()
	defer r.afterMu.Unlock()
	if r.afterRan {
		return false
	}
	r.afterFns = append(r.afterFns, f)
	return true
}

// runAfterStop runs the AfterStop functions once.
func (r *run[Req, Resp, Item]) runAfterStop() {
	r.afterMu.Lock()
	fns := r.afterFns
	r.afterFns, r.afterRan = nil, true
	r.afterMu.Unlock()
	for _, f := range fns {
		f()
	}
}

// Errors returns the channel every stage reports to, as *StageError values;
// a recovered panic wraps ErrPanic. The channel is closed when the run stops
// and replaced by Init. It is buffered (DataArgs.ErrorBuffer): when nobody
// reads, errors are dropped rather than blocking the crawl. Before the first Init it returns nil.
func (s *Scheduler[Req, Resp, Item]) Errors() <-chan error {
	if r := s.run.Load(); r != nil {
		return r.errs
	}
	return nil
}

// Leftovers returns what the last stopped run still held when it stopped
// (empty while running or before any stop). The slices are the caller's.
func (s *Scheduler[Req, Resp, Item]) Leftovers() Leftovers[Req, Resp, Item] {
	r := s.run.Load()
	if r == nil {
		return Leftovers[Req, Resp, Item]{}
	}
	r.leftMu.Lock()
	defer r.leftMu.Unlock()
	return Leftovers[Req, Resp, Item]{
		Requests:  append([]Req(nil), r.left.Requests...),
		Responses: append([]Resp(nil), r.left.Responses...),
		Items:     append([]Item(nil), r.left.Items...),
	}
}
