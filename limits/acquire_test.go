package limits

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestAcquireSpacedWithGate: a start taken with Limiter.Acquire (a
// robots.txt fetch) takes its place in the host's Delay with the requests
// that go through the open Gate, both ways, and waits for the host's slot.
func TestAcquireSpacedWithGate(t *testing.T) {
	const delay = 100 * ms
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: delay})
		g := NewGate[int](l, 16)
		defer g.Close()
		start := time.Now()
		// The Acquire first: the page parked after it starts Delay later.
		ta, err := l.Acquire(t.Context(), "a:80")
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("Acquire() = %v after %v, want a ticket at once", err, time.Since(start))
		}
		ta.Sent(time.Now())
		if err := g.Put(t.Context(), "a:80", 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * ms)
		ta.Done(Result{StatusCode: 200})
		_, tg, err := g.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != delay {
			t.Errorf("page after the Acquire started at %v, want %v", got, delay)
		}
		// Then the other way: an Acquire while the page is in flight
		// waits for its slot and its Delay.
		pageStart := time.Now()
		tg.Sent(pageStart)
		go func() {
			time.Sleep(30 * ms)
			tg.Done(Result{StatusCode: 200})
		}()
		tb, err := l.Acquire(t.Context(), "a:80")
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(pageStart); got != delay {
			t.Errorf("Acquire after the page started at %v, want %v", got, delay)
		}
		tb.Done(Result{})
		// Another host is not held up.
		other := time.Now()
		tc, err := l.Acquire(t.Context(), "b:80")
		if err != nil || time.Since(other) != 0 {
			t.Errorf("Acquire(other host) = %v after %v, want at once", err, time.Since(other))
		}
		tc.Done(Result{})
	})
}

// TestAcquireWithoutGate: with no open Gate, an Acquire's start stays with
// the Limiter, so the host's first request through the next Gate (the crawl
// that starts after a robots.txt fetch) is spaced from it.
func TestAcquireWithoutGate(t *testing.T) {
	const delay = 100 * ms
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: delay})
		start := time.Now()
		ta, err := l.Acquire(t.Context(), "a:80")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * ms)
		ta.Sent(time.Now())
		ta.Done(Result{StatusCode: 404})
		g := NewGate[int](l, 16)
		defer g.Close()
		if err := g.Put(t.Context(), "a:80", 1); err != nil {
			t.Fatal(err)
		}
		if _, tg, err := g.Get(t.Context()); err != nil {
			t.Fatal(err)
		} else {
			tg.Done(Result{})
		}
		if got := time.Since(start); got != 5*ms+delay {
			t.Errorf("first page started %v after the Acquire, want %v (Delay after it was sent)", got, 5*ms+delay)
		}
		l.gatesMu.Lock()
		n := len(l.gates)
		l.gatesMu.Unlock()
		if n != 1 {
			t.Errorf("open gates = %d, want 1 (the Acquire's own Gate closed)", n)
		}
	})
}

// TestAcquireGivesUp: an Acquire waiting for a busy host returns its
// context's error, and ErrClosed never escapes when the Gate it waits on
// closes (it goes on with another).
func TestAcquireGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "*", Parallelism: 1})
		g := NewGate[int](l, 16)
		if err := g.Put(t.Context(), "a:80", 1); err != nil {
			t.Fatal(err)
		}
		_, tg, err := g.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := l.Acquire(ctx, "a:80"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire(busy host) error = %v, want DeadlineExceeded", err)
		}
		done := make(chan error, 1)
		go func() {
			tb, err := l.Acquire(t.Context(), "a:80")
			if err == nil {
				tb.Done(Result{})
			}
			done <- err
		}()
		synctest.Wait()
		g.Close() // the waiting Acquire goes on with a Gate of its own
		if err := <-done; err != nil {
			t.Errorf("Acquire() across Close error = %v, want nil", err)
		}
		tg.Done(Result{})
	})
}
