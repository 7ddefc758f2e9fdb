package magpie

import (
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The callback runners: the goroutines that run a run's user code.
//
// A stage call that runs user code (a fetch with request callbacks, a
// page's analysis, an item's pipeline) does not run it on the stage's
// worker: Go cannot end a goroutine from outside, so a callback that never
// returns would hold the worker, and the run that must wait for its
// workers, forever. The worker hands the call to a runner and waits for
// it, or, once the run stops and the call has run for StopGrace, gives it
// up (see reap). A runner lives as long as its run and takes one call after
// another, so a page costs no goroutine, no channel and no allocation for
// its call; the run starts runners as calls need them (no more than the
// calls running at once), keeps them idle between calls, and ends them at
// shutdown. A runner whose call was given up is written off: its call's
// request is finished as stuck, a new runner takes the next call, and the
// written-off one exits when the user code returns.

// Phases of a guardCall, in the low bits of its state.
const (
	callRunning   = 0
	callReturned  = 1
	callAbandoned = 2
	callPhaseBits = 2
	callPhaseMask = 1<<callPhaseBits - 1
)

// guardCall is one stage call that runs user code for a request (see
// guard). Each runner has one, reused for every call it runs; a timer or a
// reap that outlives the call knows it by its generation.
type guardCall struct {
	req       *Request
	panicName string
	// f is the user code to run; nil for the analysis of resp, which
	// leaves items (see guardAnalysis).
	f       func()
	resp    *Response
	items   []item
	started time.Time
	// state is the call's generation << callPhaseBits | its phase. The
	// runner moves a running call to returned, giveUp to abandoned,
	// whichever comes first; the winner signals the runner's done.
	state atomic.Uint64
	// exitErr is set when f ended by a panic (panicked is set too) or by
	// runtime.Goexit; read once the call returned.
	exitErr  error
	panicked bool
	// timer, once the run reaps, gives up on the call when it has run for
	// the grace (guarded by the run's callsMu).
	timer *time.Timer
}

// gen is the call's generation.
func (g *guardCall) gen() uint64 { return g.state.Load() >> callPhaseBits }

// callRunner is a goroutine that runs the calls of a run (see guard).
type callRunner struct {
	// work hands the runner its call (in g); done tells the caller that
	// the call returned or was given up. Both hold one value, so neither
	// side blocks on a send.
	work chan struct{}
	done chan struct{}
	g    guardCall
	// busy is set while a caller owns the runner (guarded by the run's
	// callsMu).
	busy bool
	// exited is set, before done, when user code ended the runner's
	// goroutine (runtime.Goexit).
	exited bool
}

// giveUp abandons the call of generation gen, if it is still running: the
// caller stops waiting for it.
func (rn *callRunner) giveUp(gen uint64) {
	if rn.g.state.CompareAndSwap(gen<<callPhaseBits|callRunning, gen<<callPhaseBits|callAbandoned) {
		rn.done <- struct{}{}
	}
}

// giveUpLater gives up on the runner's current call after d.
func (rn *callRunner) giveUpLater(d time.Duration) *time.Timer {
	gen := rn.g.gen()
	return time.AfterFunc(d, func() { rn.giveUp(gen) })
}

// guardResult is how a guarded call that returned ended: exitErr is set
// when f was cut short by a panic (panicked set, a *CallbackPanicError) or
// by runtime.Goexit in a callback (see goexitError).
type guardResult struct {
	exitErr  error
	panicked bool
	// items are what the analysis left (guardAnalysis).
	items []item
}

// guard runs f, the part of a stage that runs user code for req, on one of
// the run's callback runners and waits for it, so that a callback that
// never returns can be abandoned when the run stops (see reap). It reports
// false when f was abandoned; req is then finished as stuck (finishStuck),
// and f, if it ever returns, finds req finished and stops there. A panic
// that escapes f is reported as a *CallbackPanicError named panicName.
func (r *run) guard(req *Request, panicName string, f func()) (res guardResult, ok bool) {
	return r.guardRun(req, panicName, f, nil)
}

// guardAnalysis is guard for the analysis of resp, the page's callbacks,
// in its request's region: a call per page that needs no closure.
func (r *run) guardAnalysis(resp *Response) (res guardResult, ok bool) {
	return r.guardRun(resp.Request, "engine", nil, resp)
}

// analyzeMarked runs the analysis of resp in its request's region.
func (r *run) analyzeMarked(resp *Response) (items []item) {
	r.c.markCallbacksFor(resp.Request, func() { items = r.c.analyze(r, resp) })
	return items
}

// guardRun is guard running f, or the analysis of resp when f is nil.
func (r *run) guardRun(req *Request, panicName string, f func(), resp *Response) (res guardResult, ok bool) {
	r.callsMu.Lock()
	rn := r.takeRunner()
	g := &rn.g
	g.req, g.panicName, g.f, g.resp, g.started = req, panicName, f, resp, time.Now()
	if r.reaping {
		// The run is stopping and its grace has run out once already:
		// this call gets a grace of its own.
		g.timer = rn.giveUpLater(r.grace())
	}
	r.callsMu.Unlock()
	rn.work <- struct{}{}
	<-rn.done
	abandoned := g.state.Load()&callPhaseMask == callAbandoned
	r.callsMu.Lock()
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	if !abandoned {
		res = guardResult{exitErr: g.exitErr, panicked: g.panicked, items: g.items}
	}
	if abandoned || rn.exited {
		r.writeOff(rn)
	} else {
		// The next call is a new generation: a timer or reap left over
		// from this one finds it so and does nothing.
		g.state.Store((g.gen() + 1) << callPhaseBits)
		g.req, g.f, g.resp, g.items, g.exitErr, g.panicked = nil, nil, nil, nil, nil, false
		r.putRunner(rn)
	}
	r.callsMu.Unlock()
	if abandoned {
		r.finishStuck(req, g.started)
		return guardResult{}, false
	}
	return res, true
}

// takeRunner returns an idle runner, or starts one; the caller holds
// callsMu. A runner started after shutdown has ended the others (a call
// it did not expect) runs its call and exits.
func (r *run) takeRunner() *callRunner {
	var rn *callRunner
	if n := len(r.idle); n > 0 {
		rn = r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
	} else {
		rn = &callRunner{work: make(chan struct{}, 1), done: make(chan struct{}, 1)}
		r.runners = append(r.runners, rn)
		r.runnersWG.Add(1)
		go r.runCalls(rn)
	}
	rn.busy = true
	return rn
}

// putRunner makes rn, whose call returned, idle again; the caller holds
// callsMu.
func (r *run) putRunner(rn *callRunner) {
	rn.busy = false
	if !r.runnersClosed {
		r.idle = append(r.idle, rn)
	}
}

// writeOff gives up rn, whose call was abandoned or whose goroutine user
// code ended: the run no longer waits for it. The caller holds callsMu.
func (r *run) writeOff(rn *callRunner) {
	if i := slices.Index(r.runners, rn); i >= 0 {
		r.runners = slices.Delete(r.runners, i, i+1)
	}
	r.runnersWG.Done()
}

// runCalls is a runner's loop: it runs the calls handed to it until the
// run ends (runnersQuit) or it is written off.
func (r *run) runCalls(rn *callRunner) {
	for {
		select {
		case <-rn.work:
		case <-r.runnersQuit:
			r.callsMu.Lock()
			busy := rn.busy
			r.callsMu.Unlock()
			if !busy {
				r.runnersWG.Done()
				return
			}
			<-rn.work // a call handed over just before the quit
		}
		if !r.runCall(rn) {
			return
		}
	}
}

// runCall runs rn's call and reports whether rn may take another: not when
// the call was given up, nor when it ended the goroutine (runtime.Goexit,
// when runCall does not return at all).
func (r *run) runCall(rn *callRunner) (again bool) {
	g := &rn.g
	returned := false
	defer func() {
		if !returned {
			// On this goroutine: goexitError finds the callback that
			// safely noted here.
			if v := recover(); v != nil {
				g.panicked = true
				g.exitErr = &CallbackPanicError{Callback: g.panicName, Value: v, Stack: debug.Stack()}
			} else {
				g.exitErr = r.c.goexitError(nil)
				rn.exited = true
			}
		}
		gen := g.gen()
		again = g.state.CompareAndSwap(gen<<callPhaseBits|callRunning, gen<<callPhaseBits|callReturned)
		if again {
			rn.done <- struct{}{}
		}
	}()
	if g.f != nil {
		g.f()
	} else {
		g.items = r.analyzeMarked(g.resp)
	}
	returned = true
	return true
}

// closeRunners ends the run's idle runners and waits for them; written-off
// runners exit when their user code returns. Called by shutdown, when no
// stage calls guard any more.
func (r *run) closeRunners() {
	r.callsMu.Lock()
	r.runnersClosed = true
	clear(r.idle)
	r.idle = nil
	r.callsMu.Unlock()
	close(r.runnersQuit)
	r.runnersWG.Wait()
}

// reap abandons every call that has run user code for the grace already,
// and gives each other call, and every call that starts from now on, the
// rest of its grace: a callback that started a moment ago is not stuck.
func (r *run) reap() {
	type target struct {
		rn  *callRunner
		gen uint64
	}
	grace := r.grace()
	r.callsMu.Lock()
	r.reaping = true
	var stuck []target
	for _, rn := range r.runners {
		if !rn.busy {
			continue
		}
		switch ran := time.Since(rn.g.started); {
		case ran >= grace:
			stuck = append(stuck, target{rn, rn.g.gen()})
		case rn.g.timer == nil:
			rn.g.timer = rn.giveUpLater(grace - ran)
		}
	}
	r.callsMu.Unlock()
	for _, t := range stuck {
		t.rn.giveUp(t.gen)
	}
}

// finishStuck finishes req, whose call (started then) was abandoned, with a
// *CallbackStuckError, which OnError receives, unless the call finished it
// meanwhile. A queue run that is stopping leaves the entry to front.close,
// which releases it with a context of its own.
func (r *run) finishStuck(req *Request, started time.Time) {
	if !req.finished.CompareAndSwap(false, true) {
		return
	}
	label := req.running.Load()
	if label == nil {
		label = &callbackLabel{kind: "callback"}
	}
	err := &CallbackStuckError{Callback: label.kind, Selector: label.selector, URL: logURL(req), Running: time.Since(started)}
	r.callsMu.Lock()
	r.stuck = append(r.stuck, err)
	r.callsMu.Unlock()
	r.c.logger.Error("callback did not return; abandoned", "url", logURL(req), "method", req.Method,
		"request_id", req.ID, "duration", err.Running, "err", err)
	req.setFinal(req.attempt, err)
	if req.root != nil {
		req.root.setFinal(req.attempt, err)
	}
	// OnError hears of it, on a runner too: the run is reaping, so an
	// OnError that blocks as well is abandoned after the grace. The stuck
	// runner no longer speaks for req (see regionGID): this OnError has a
	// region and token of its own.
	req.regionGID.Store(0)
	r.guard(req, "OnError", func() {
		r.c.newRegion(func(token uint64) {
			r.c.handleOnErrorAs(&Response{Request: req, Ctx: req.Ctx}, token, err)
		})
	})
	if !r.queueMode || r.ctx.Err() == nil {
		r.front.finish(r.ctx, req, false)
	}
	r.settled()
}

// stuckErrors returns the callbacks the run abandoned.
func (r *run) stuckErrors() []error {
	r.callsMu.Lock()
	defer r.callsMu.Unlock()
	return slices.Clone(r.stuck)
}

// runnerFields are the run's callback runners (see guard); embedded in run.
type runnerFields struct {
	// callsMu guards idle, runners, runnersClosed, reaping and stuck, and
	// each runner's busy and its call's timer.
	callsMu sync.Mutex
	// idle are the runners waiting for a call.
	idle []*callRunner
	// runners are the runners the run owns, idle or busy (not those
	// written off).
	runners []*callRunner
	// runnersClosed is set at shutdown: runners then exit when idle.
	runnersClosed bool
	// runnersQuit is closed at shutdown: idle runners exit.
	runnersQuit chan struct{}
	// runnersWG counts the runners the run owns.
	runnersWG sync.WaitGroup
	// reaping is set once the run, stopping, has given up waiting for
	// callbacks: from then on each call waits at most the grace.
	reaping bool
	// stuck are the callbacks abandoned (*CallbackStuckError).
	stuck []error
}
