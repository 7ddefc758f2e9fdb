package limits

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestDelayFromSent checks that the gap is measured from the moment the
// request reached the wire (Ticket.Sent), not from Get, and that the host
// starts nothing while a request is between the two.
func TestDelayFromSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: 100 * ms, Parallelism: 4}), 8)
		g.SetAwaitSent(true)
		for i := range 3 {
			if err := g.Put(t.Context(), "a.com", req{host: "a.com", n: i}); err != nil {
				t.Fatalf("Put() error = %v", err)
			}
		}
		_, first, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		// A slow dial: the request reaches the wire 40 ms after Get.
		<-time.After(40 * ms)
		sent := time.Now()
		first.Sent(sent)
		_, second, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		if gap := time.Since(sent); gap < 100*ms {
			t.Errorf("second start %v after the first was sent, want >= 100ms", gap)
		}
		// The second never reaches the wire (a cache hit, say): the gap is
		// then measured from its Get, and Done releases the host.
		start2 := time.Now()
		second.Done(Result{StatusCode: 200})
		_, third, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		if gap := time.Since(start2); gap != 100*ms {
			t.Errorf("third start %v after an unsent second, want 100ms", gap)
		}
		first.Done(Result{StatusCode: 200})
		third.Done(Result{StatusCode: 200})
	})
}

// TestUnsentHoldsHost checks that a request taken but not yet on the wire
// keeps its host from starting another, even far past the gap.
func TestUnsentHoldsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: 10 * ms, Parallelism: 2}), 8)
		g.SetAwaitSent(true)
		for i := range 2 {
			if err := g.Put(t.Context(), "a.com", req{host: "a.com", n: i}); err != nil {
				t.Fatalf("Put() error = %v", err)
			}
		}
		_, first, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		got := make(chan *Ticket, 1)
		go func() {
			_, tk, err := g.Get(t.Context())
			if err == nil {
				got <- tk
			}
		}()
		<-time.After(time.Second)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("second request started while the first had not reached the wire")
		default:
		}
		sentAt := time.Now()
		first.Sent(sentAt)
		second := <-got
		if gap := time.Since(sentAt); gap != 10*ms {
			t.Errorf("second start %v after Sent, want the 10ms delay", gap)
		}
		first.Done(Result{StatusCode: 200})
		second.Done(Result{StatusCode: 200})
	})
}

// TestHostCap checks SetHostCap: hosts no rule limits get at most n in
// flight, ruled hosts keep their rule's Parallelism.
func TestHostCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "ruled.com", Parallelism: 6}), 64)
		g.SetHostCap(3)
		var qs []req
		for i := range 20 {
			qs = append(qs, req{host: "free.com", n: i}, req{host: "ruled.com", n: i})
		}
		// Requests come back in Put order per host; reqs interleaves them.
		rec := simulate(t, g, qs, 32, fixed(10*ms))
		if got := rec.maxHost["free.com"]; got != 3 {
			t.Errorf("free.com: most in flight = %d, want the host cap 3", got)
		}
		if got := rec.maxHost["ruled.com"]; got != 6 {
			t.Errorf("ruled.com: most in flight = %d, want its Parallelism 6", got)
		}
	})
}

// TestPolitenessOutlivesGate checks that a Gate opened after another one
// closed over the same Limiter keeps the hosts' delays, Retry-After holds
// and back-off (the next crawl of the same collector).
func TestPolitenessOutlivesGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, nil, &Rule{DomainGlob: "slow.com", Delay: 300 * ms})
		g1 := NewGate[req](lim, 8)
		start := serial(t, g1, "slow.com", 0, Result{StatusCode: 200})
		serial(t, g1, "held.com", 0, Result{StatusCode: 429, RetryAfter: 5 * time.Second})
		heldDone := time.Now()
		g1.Close()

		g2 := NewGate[req](lim, 8)
		if next := serial(t, g2, "slow.com", 0, Result{StatusCode: 200}); next.Sub(start) < 300*ms {
			t.Errorf("slow.com: next Gate started %v after the last start, want >= Delay 300ms", next.Sub(start))
		}
		next := serial(t, g2, "held.com", 0, Result{StatusCode: 200})
		if wait := next.Sub(heldDone); wait < 5*time.Second {
			t.Errorf("held.com: next Gate started %v after a Retry-After of 5s, want >= 5s", wait)
		}
		g2.Close()

		// Long after, nothing is held and nothing is kept.
		<-time.After(DefaultIdleTimeout + 10*time.Second)
		g3 := NewGate[req](lim, 8)
		before := time.Now()
		if got := serial(t, g3, "held.com", 0, Result{StatusCode: 200}); !got.Equal(before) {
			t.Errorf("held.com waited %v after its hold had passed, want no wait", got.Sub(before))
		}
		g3.Close()
	})
}

// TestPolitenessMemoryBounded checks that what closed Gates leave with the
// Limiter is dropped once expired, so it does not grow with every host ever
// crawled.
func TestPolitenessMemoryBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := New()
		for round := range 5 {
			g := NewGate[req](lim, 8)
			for i := range 100 {
				serial(t, g, fmt.Sprintf("h%d-%d.com", round, i), 0, Result{StatusCode: 429, RetryAfter: time.Second})
			}
			g.Close()
			<-time.After(DefaultIdleTimeout + 2*time.Second)
		}
		lim.memMu.Lock()
		defer lim.memMu.Unlock()
		if n := len(lim.mem); n > 200 {
			t.Errorf("Limiter remembers %d hosts after 5 rounds of 100 expired ones, want <= 200", n)
		}
	})
}

func TestTicketSerialAndGap(t *testing.T) {
	lim := newLimiter(t, nil,
		&Rule{DomainGlob: "one.com", Delay: 10 * ms},
		&Rule{DomainGlob: "four.com", Delay: 10 * ms, Parallelism: 4})
	g := NewGate[req](lim, 8)
	for _, tt := range []struct {
		host        string
		gap, serial bool
	}{{"one.com", true, true}, {"four.com", true, false}, {"free.com", false, false}} {
		if err := g.Put(t.Context(), tt.host, req{host: tt.host}); err != nil {
			t.Fatalf("Put() error = %v", err)
		}
		_, tk, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		if tk.HasGap() != tt.gap || tk.Serial() != tt.serial {
			t.Errorf("%s: HasGap, Serial = %v, %v; want %v, %v", tt.host, tk.HasGap(), tk.Serial(), tt.gap, tt.serial)
		}
		tk.Done(Result{StatusCode: 200})
	}
}
