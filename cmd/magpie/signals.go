package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// How magpie answers SIGINT (Ctrl-C) and SIGTERM:
//
//   - The first stops the crawl as magpie.Collector.Stop does, whatever
//     --delay: no request starts any more, those in flight get a moment,
//     those never sent are counted apart (not as failures), the output is
//     finished and --state keeps the rest. The process exits 128 plus the
//     signal's number, as shells expect: 130 for SIGINT, 143 for SIGTERM.
//   - A second one forces the exit at once (Scrapy's "send again to force"),
//     still finishing the output written so far (see onForcedExit), with the
//     first signal's status.

// signalError is the cause of a crawl stopped by a signal.
type signalError struct{ sig syscall.Signal }

func (e *signalError) Error() string { return "interrupted by " + signalName(e.sig) }

// status is the exit status for the signal: 128 plus its number.
func (e *signalError) status() int { return 128 + int(e.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// forceGrace bounds how long a forced exit waits for the onForcedExit
// functions (an output on a FIFO nobody reads could block them).
const forceGrace = 3 * time.Second

// interrupts holds the functions a forced exit runs.
type interrupts struct {
	// mu guards hooks and next. A forced exit takes it and never gives it
	// back: a function removed during one waits for the process to end,
	// so the output is never finished twice.
	mu    sync.Mutex
	hooks map[int]func()
	next  int
}

type interruptsKey struct{}

// handleSignals returns a context that the first SIGINT or SIGTERM cancels,
// its cause a *signalError; a second runs the onForcedExit functions and
// calls exit with the first signal's status. stop ends the handling (the
// signals' default action applies again) and waits for its goroutine.
func handleSignals(parent context.Context, stderr io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	in := &interrupts{hooks: map[int]func(){}}
	ctx = context.WithValue(ctx, interruptsKey{}, in)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var first *signalError
		for {
			select {
			case s := <-ch:
				sig, _ := s.(syscall.Signal)
				if first == nil {
					first = &signalError{sig}
					fmt.Fprintf(stderr, "\nmagpie: %s: stopping the crawl; send it again to exit at once\n", signalName(sig))
					cancel(first)
					continue
				}
				fmt.Fprintf(stderr, "\nmagpie: %s again: exiting now\n", signalName(sig))
				in.force()
				exit(first.status())
				return
			case <-done:
				return
			}
		}
	})
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// force runs the onForcedExit functions, at most forceGrace in all, and
// keeps in.mu so that none is removed and run again by the crawl's own end.
func (in *interrupts) force() {
	in.mu.Lock()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		for _, f := range in.hooks {
			f()
		}
	}()
	select {
	case <-ran:
	case <-time.After(forceGrace):
	}
}

// onForcedExit registers f to run if a second signal forces the exit while
// ctx's command runs; remove unregisters it (and waits for a forced exit in
// progress, which ends the process). f may run while the command itself
// does what f does, and before or after it: f must then wait for the
// command's work and not do it twice (output.finish does so). Keeping f
// registered until that work is done is what makes a forced exit wait for
// it (at most forceGrace) rather than end the process half way. Without
// handleSignals in ctx (tests calling run) it does nothing.
func onForcedExit(ctx context.Context, f func()) (remove func()) {
	in, ok := ctx.Value(interruptsKey{}).(*interrupts)
	if !ok {
		return func() {}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	id := in.next
	in.next++
	in.hooks[id] = f
	return func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		delete(in.hooks, id)
	}
}

// interruptedStatus is the exit status of a command interrupted while
// running under ctx: 128 plus the signal's number, 130 when it is unknown.
func interruptedStatus(ctx context.Context) int {
	if se, ok := context.Cause(ctx).(*signalError); ok {
		return se.status()
	}
	return exitInterrupted
}
