package limits

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

const ms = time.Millisecond

func TestDelayBetweenStarts(t *testing.T) {
	tests := []struct {
		name    string
		rule    *Rule
		lat     time.Duration
		wantGap time.Duration
	}{
		{"delay, fast server", &Rule{DomainGlob: "*", Delay: 200 * ms}, 10 * ms, 200 * ms},
		{"delay, slow server, parallelism 2", &Rule{DomainGlob: "*", Delay: 200 * ms, Parallelism: 2}, time.Second, 200 * ms},
		{"delay plus random", &Rule{DomainGlob: "*", Delay: 100 * ms, RandomDelay: 300 * ms, Parallelism: 4}, 50 * ms, 100 * ms},
		{"random only", &Rule{DomainGlob: "*", RandomDelay: 300 * ms}, 10 * ms, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGate[req](newLimiter(t, nil, tt.rule), 16)
				rec := simulate(t, g, reqs(8, "a.com:80", "b.com:80", "c.com:80"), 8, fixed(tt.lat))
				for _, h := range []string{"a.com:80", "b.com:80", "c.com:80"} {
					if got := rec.minGap(h); got < tt.wantGap {
						t.Errorf("host %s: least gap between starts = %v, want >= %v", h, got, tt.wantGap)
					}
				}
			})
		})
	}
}

func TestRandomDelayJitters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: 100 * ms, RandomDelay: 100 * ms}), 16)
		rec := simulate(t, g, reqs(20, "a.com"), 1, fixed(ms))
		s := rec.starts["a.com"]
		seen := map[time.Duration]bool{}
		for i := 1; i < len(s); i++ {
			gap := s[i].Sub(s[i-1])
			if gap < 100*ms || gap >= 200*ms {
				t.Errorf("gap %d = %v, want in [100ms, 200ms)", i, gap)
			}
			seen[gap] = true
		}
		if len(seen) < 5 {
			t.Errorf("%d distinct gaps over 19, want jitter", len(seen))
		}
	})
}

func TestParallelism(t *testing.T) {
	tests := []struct {
		name      string
		rule      *Rule
		hosts     []string
		wantHost  int // most in flight to each host
		wantTotal int // most in flight overall
	}{
		{"per host, not per rule", &Rule{DomainGlob: "*.example.com", Parallelism: 2},
			[]string{"a.example.com", "b.example.com", "c.example.com"}, 2, 6},
		{"delay-only rule serializes", &Rule{DomainGlob: "*", Delay: 50 * ms},
			[]string{"a.com", "b.com"}, 1, 2},
		{"no rule is unlimited", &Rule{DomainGlob: "nothing.invalid", Parallelism: 1},
			[]string{"a.com", "b.com"}, 8, 16},
		{"rule without delay or parallelism is unlimited", &Rule{DomainGlob: "*"},
			[]string{"a.com"}, 8, 8},
		{"total parallelism", &Rule{DomainGlob: "*", Parallelism: 2, TotalParallelism: 3},
			[]string{"a.com", "b.com", "c.com", "d.com"}, 2, 3},
		{"total parallelism only", &Rule{DomainGlob: "*", TotalParallelism: 5},
			[]string{"a.com", "b.com"}, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGate[req](newLimiter(t, nil, tt.rule), 64)
				rec := simulate(t, g, reqs(8, tt.hosts...), 32, fixed(300*ms))
				for _, h := range tt.hosts {
					if got := rec.maxHost[h]; got > tt.wantHost {
						t.Errorf("host %s: most in flight = %d, want <= %d", h, got, tt.wantHost)
					}
				}
				if rec.maxTotal != tt.wantTotal {
					t.Errorf("most in flight overall = %d, want %d", rec.maxTotal, tt.wantTotal)
				}
			})
		})
	}
}

// TestHostsDoNotSlowEachOther is the figure: 2 hosts × 5 requests
// with Delay 200 ms take about 0.8 s, not 1.8 s, even when every request of
// the first host is Put before any of the second.
func TestHostsDoNotSlowEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: 200 * ms}), 16)
		rec := simulate(t, g, reqs(5, "a.com", "b.com"), 4, fixed(10*ms))
		if want := 800*ms + 10*ms; rec.elapsed != want {
			t.Errorf("2 hosts × 5 requests took %v, want %v", rec.elapsed, want)
		}
		for _, h := range []string{"a.com", "b.com"} {
			if first := rec.starts[h][0]; first.Sub(rec.starts["a.com"][0]) != 0 {
				t.Errorf("host %s started %v after a.com, want at once", h, first.Sub(rec.starts["a.com"][0]))
			}
		}
	})
}

// TestWaitingHostHoldsNoWorker: with one worker, a delayed host must not
// keep the worker from a ready host.
func TestWaitingHostHoldsNoWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "slow.com", Delay: time.Second})
		g := NewGate[req](l, 64)
		qs := append(reqs(3, "slow.com"), reqs(20, "fast.com")...)
		rec := simulate(t, g, qs, 1, fixed(10*ms))
		// slow.com needs 2 s for its 3 starts; fast.com's 20 × 10 ms fit
		// in the gaps, so the crawl ends with slow.com's last request.
		if want := 2*time.Second + 10*ms; rec.elapsed != want {
			t.Errorf("crawl took %v, want %v", rec.elapsed, want)
		}
	})
}

func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		name     string
		opts     []Option
		rule     *Rule
		crawl    time.Duration
		wantGap  time.Duration // least gap between starts
		wantMax  time.Duration // and the most, to show a floor did not apply
		wantPar1 bool
	}{
		{"floor over rule delay", nil, &Rule{DomainGlob: "*", Delay: 100 * ms}, 300 * ms, 300 * ms, 300 * ms, true},
		{"rule delay above crawl-delay", nil, &Rule{DomainGlob: "*", Delay: 500 * ms}, 300 * ms, 500 * ms, 500 * ms, true},
		{"rule ignores crawl-delay", nil, &Rule{DomainGlob: "*", Delay: 100 * ms, IgnoreCrawlDelay: true}, 300 * ms, 100 * ms, 100 * ms, true},
		{"no rule: crawl-delay is the delay", nil, &Rule{DomainGlob: "other.invalid"}, 300 * ms, 300 * ms, 300 * ms, true},
		{"limiter ignores crawl-delay", []Option{IgnoreCrawlDelay()}, &Rule{DomainGlob: "other.invalid"}, 300 * ms, 0, 0, false},
		{"capped by MaxHold", []Option{MaxHold(time.Second)}, &Rule{DomainGlob: "other.invalid"}, time.Hour, time.Second, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, tt.opts, tt.rule)
				l.SetCrawlDelay("a.com:80", tt.crawl)
				g := NewGate[req](l, 64)
				rec := simulate(t, g, reqs(6, "a.com:80", "b.com:80"), 16, fixed(50*ms))
				s := rec.starts["a.com:80"]
				for i := 1; i < len(s); i++ {
					if gap := s[i].Sub(s[i-1]); gap < tt.wantGap || gap > tt.wantMax {
						t.Errorf("gap %d = %v, want in [%v, %v]", i, gap, tt.wantGap, tt.wantMax)
					}
				}
				if par1 := rec.maxHost["a.com:80"] == 1; par1 != tt.wantPar1 {
					t.Errorf("most in flight to a.com = %d, want serialized = %v", rec.maxHost["a.com:80"], tt.wantPar1)
				}
				if tt.rule.Delay == 0 && rec.minGap("b.com:80") != 0 {
					t.Errorf("b.com (no Crawl-delay) least gap = %v, want 0", rec.minGap("b.com:80"))
				}
			})
		})
	}
}

// serial drives one host by hand: Put, Get, wait lat, Done(res); it returns
// the start time.
func serial(t *testing.T, g *Gate[req], host string, lat time.Duration, res Result) time.Time {
	t.Helper()
	if err := g.Put(t.Context(), host, req{host: host}); err != nil {
		t.Fatalf("Put() error = %v", err)
	}
	_, tk, err := g.Get(t.Context())
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	start := time.Now()
	<-time.After(lat) // the fake download, in virtual time
	tk.Done(res)
	return start
}

func TestRetryAfter(t *testing.T) {
	for _, code := range []int{429, 503, 200} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGate[req](New(), 8)
				serial(t, g, "a.com", 100*ms, Result{StatusCode: code, RetryAfter: 30 * time.Second})
				done := time.Now()
				next := serial(t, g, "a.com", 0, Result{StatusCode: 200})
				if wait := next.Sub(done); wait < 30*time.Second {
					t.Errorf("next start %v after a Retry-After of 30s, want >= 30s", wait)
				}
				// Another host is not held.
				if other := serial(t, g, "b.com", 0, Result{StatusCode: 200}); !other.Equal(next) {
					t.Errorf("b.com started %v after a.com's hold, want at once", other.Sub(next))
				}
			})
		})
	}
}

func TestRetryAfterCappedByMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](New(MaxHold(time.Minute)), 8)
		serial(t, g, "a.com", 0, Result{StatusCode: 429, RetryAfter: 24 * time.Hour})
		done := time.Now()
		next := serial(t, g, "a.com", 0, Result{StatusCode: 200})
		if wait := next.Sub(done); wait != time.Minute {
			t.Errorf("wait after Retry-After 24h = %v, want MaxHold 1m", wait)
		}
	})
}

func TestBackoffAndRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](New(MaxBackoff(10*time.Second)), 8)
		status := []int{503, 429, 503, 503, 503, 503, 200, 200, 200, 503, 404, 500, 200}
		// ceil[i] is the back-off ceiling b that status[i] leaves; the next
		// start comes in [b/2, b) after it. Each success pays back one
		// doubling; a 500 is neutral.
		ceil := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second,
			0, 0, 0, 8 * time.Second, 0, 0, 0}
		for i, code := range status {
			serial(t, g, "a.com", 0, Result{StatusCode: code})
			done := time.Now()
			if other := serial(t, g, "b.com", 0, Result{StatusCode: 200}); !other.Equal(done) {
				t.Fatalf("b.com started %v late: held by a.com's back-off", other.Sub(done))
			}
			if err := g.Put(t.Context(), "a.com", req{host: "a.com"}); err != nil {
				t.Fatal(err)
			}
			_, tk, err := g.Get(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			wait := time.Since(done)
			if b := ceil[i]; wait < b/2 || wait >= max(b, 1) {
				t.Errorf("after response %d (%d): next start in %v, want in [%v, %v)", i, code, wait, b/2, b)
			}
			// The probe is a request too; end it neutrally (a 500) so only
			// the scripted statuses move the back-off.
			tk.Done(Result{StatusCode: 500})
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if n := g.hosts["a.com"].strikes; n != 2 {
			t.Errorf("strikes = %d at the end, want 2", n)
		}
	})
}

func TestBackoffScalesWithDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, []Option{MaxBackoff(time.Minute)}, &Rule{DomainGlob: "*", Delay: 3 * time.Second}), 8)
		serial(t, g, "a.com", 0, Result{StatusCode: 503})
		serial(t, g, "a.com", 0, Result{StatusCode: 503})
		done := time.Now()
		next := serial(t, g, "a.com", 0, Result{StatusCode: 200})
		if wait := next.Sub(done); wait < 3*time.Second || wait >= 6*time.Second {
			t.Errorf("wait after 2 × 503 with Delay 3s = %v, want in [3s, 6s)", wait)
		}
	})
}

func TestAutoThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rule := &Rule{DomainGlob: "*", Delay: 50 * ms, AutoThrottle: &AutoThrottle{TargetConcurrency: 2, MaxDelay: 3 * time.Second}}
		g := NewGate[req](newLimiter(t, nil, rule), 8)
		adapt := func() time.Duration {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.hosts["a.com"].adapt
		}
		step := func(lat time.Duration, code int) time.Duration {
			serial(t, g, "a.com", lat, Result{StatusCode: code, Latency: lat})
			return adapt()
		}
		// Slow responses: jump straight up to latency/2.
		if got := step(time.Second, 200); got != 500*ms {
			t.Fatalf("after 1s latency: delay = %v, want 500ms", got)
		}
		// Steady 400 ms: move halfway toward 200 ms each time.
		wantSeq := []time.Duration{350 * ms, 275 * ms, 237500 * time.Microsecond}
		for i, want := range wantSeq {
			if got := step(400*ms, 200); got != want {
				t.Errorf("step %d: delay = %v, want %v", i, got, want)
			}
		}
		for range 20 {
			step(400*ms, 200)
		}
		if got := adapt(); got < 200*ms || got > 201*ms {
			t.Errorf("after a steady 400ms latency: delay = %v, want ~200ms", got)
		}
		// A fast error does not lower the delay; a slow one raises it.
		if got := step(10*ms, 500); got < 200*ms {
			t.Errorf("after a fast 500: delay = %v, want unchanged >= 200ms", got)
		}
		if got := step(2*time.Second, 500); got != time.Second {
			t.Errorf("after a slow 500: delay = %v, want 1s", got)
		}
		// Clamped to MaxDelay and to Delay.
		if got := step(time.Minute, 200); got != 3*time.Second {
			t.Errorf("after 1 min latency: delay = %v, want MaxDelay 3s", got)
		}
		for range 30 {
			step(ms, 200)
		}
		if got := adapt(); got != 50*ms {
			t.Errorf("after fast responses: delay = %v, want Delay 50ms", got)
		}
	})
}

// TestAutoThrottleConverges runs a steady crawl: start gaps settle at
// latency / TargetConcurrency and that many requests stay in flight.
func TestAutoThrottleConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rule := &Rule{DomainGlob: "*", AutoThrottle: &AutoThrottle{TargetConcurrency: 4}}
		g := NewGate[req](newLimiter(t, nil, rule), 128)
		rec := simulate(t, g, reqs(60, "a.com"), 16, fixed(time.Second))
		s := rec.starts["a.com"]
		for i := len(s) - 10; i < len(s); i++ {
			if gap := s[i].Sub(s[i-1]); gap < 249*ms || gap > 251*ms {
				t.Errorf("late gap %d = %v, want ~250ms (1s / 4)", i, gap)
			}
		}
		if rec.maxHost["a.com"] > 5 {
			t.Errorf("most in flight = %d, want about the target 4", rec.maxHost["a.com"])
		}
	})
}

func TestPutBlocksWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](New(), 2)
		ctx := t.Context()
		for i := range 2 {
			if err := g.Put(ctx, "a.com", req{"a.com", i}); err != nil {
				t.Fatalf("Put(%d) error = %v", i, err)
			}
		}
		putDone := make(chan error, 1)
		go func() { putDone <- g.Put(ctx, "b.com", req{"b.com", 0}) }()
		synctest.Wait()
		select {
		case err := <-putDone:
			t.Fatalf("Put on a full gate returned %v, want it to block", err)
		default:
		}
		if _, _, err := g.Get(ctx); err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		synctest.Wait()
		select {
		case err := <-putDone:
			if err != nil {
				t.Fatalf("Put() error = %v after Get freed a slot, want nil", err)
			}
		default:
			t.Fatal("Put still blocked after Get freed a slot")
		}
		if n := g.Len(); n != 2 {
			t.Errorf("Len() = %d, want 2", n)
		}
	})
}

func TestContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](New(), 1)
		ctx, cancel := context.WithCancel(t.Context())
		getErr := make(chan error, 1)
		go func() { _, _, err := g.Get(ctx); getErr <- err }()
		if err := g.Put(t.Context(), "a.com", req{}); err != nil { // fills the gate...
			t.Fatal(err)
		}
		// ...but the waiting Get takes it at once; fill it again.
		synctest.Wait()
		if err := <-getErr; err != nil {
			t.Fatalf("Get() error = %v, want the item", err)
		}
		if err := g.Put(t.Context(), "a.com", req{}); err != nil {
			t.Fatal(err)
		}
		putErr := make(chan error, 1)
		go func() { putErr <- g.Put(ctx, "b.com", req{}) }()
		// A Get that waits for a delayed host is cancellable too.
		l := newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: time.Hour})
		g2 := NewGate[req](l, 4)
		serial(t, g2, "a.com", 0, Result{StatusCode: 200})
		if err := g2.Put(t.Context(), "a.com", req{}); err != nil {
			t.Fatal(err)
		}
		go func() { _, _, err := g2.Get(ctx); getErr <- err }()
		synctest.Wait()
		cancel()
		for name, ch := range map[string]chan error{"Put": putErr, "Get": getErr} {
			if err := <-ch; !errors.Is(err, context.Canceled) {
				t.Errorf("%s() error = %v, want %v", name, err, context.Canceled)
			}
		}
		// A deadline works the same way, in virtual time.
		dctx, dcancel := context.WithTimeout(t.Context(), time.Minute)
		defer dcancel()
		if _, _, err := g2.Get(dctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Get() error = %v, want %v", err, context.DeadlineExceeded)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "slow.com", Delay: time.Hour})
		g := NewGate[req](l, 4)
		ctx := t.Context()
		serial(t, g, "slow.com", 0, Result{StatusCode: 200}) // slow.com now waits an hour
		if err := g.Put(ctx, "c.com", req{"c.com", 0}); err != nil {
			t.Fatal(err)
		}
		_, out, err := g.Get(ctx) // a ticket that stays out across Close
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []req{{"slow.com", 1}, {"a.com", 0}, {"slow.com", 2}, {"slow.com", 3}} {
			if err := g.Put(ctx, q.host, q); err != nil {
				t.Fatal(err)
			}
		}
		putErr, getErr := make(chan error, 1), make(chan error, 1)
		go func() { putErr <- g.Put(ctx, "e.com", req{"e.com", 0}) }()
		synctest.Wait()
		// a.com was Put after slow.com 1 but is ready first.
		for _, want := range []req{{"a.com", 0}, {"e.com", 0}} {
			q, tk, err := g.Get(ctx)
			if err != nil || q != want {
				t.Fatalf("Get() = %v, %v, want %v", q, err, want)
			}
			tk.Done(Result{StatusCode: 200})
			if want.host == "a.com" {
				if err := <-putErr; err != nil {
					t.Fatalf("blocked Put() error = %v after a Get, want nil", err)
				}
			}
		}
		if err := g.Put(ctx, "slow.com", req{"slow.com", 4}); err != nil {
			t.Fatal(err)
		}
		// Full, and only slow.com is parked: Put and Get both block.
		go func() { putErr <- g.Put(ctx, "f.com", req{}) }()
		go func() { _, _, err := g.Get(ctx); getErr <- err }()
		synctest.Wait()
		want := []req{{"slow.com", 1}, {"slow.com", 2}, {"slow.com", 3}, {"slow.com", 4}}
		if got := g.Close(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Close() = %v, want %v", got, want)
		}
		for name, ch := range map[string]chan error{"Put": putErr, "Get": getErr} {
			if err := <-ch; !errors.Is(err, ErrClosed) {
				t.Errorf("blocked %s() error = %v, want %v", name, err, ErrClosed)
			}
		}
		if got := g.Close(); got != nil {
			t.Errorf("second Close() = %v, want nil", got)
		}
		if err := g.Put(ctx, "a.com", req{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Put() after Close error = %v, want %v", err, ErrClosed)
		}
		if _, _, err := g.Get(ctx); !errors.Is(err, ErrClosed) {
			t.Errorf("Get() after Close error = %v, want %v", err, ErrClosed)
		}
		out.Done(Result{StatusCode: 200}) // harmless after Close
		if s := g.Stats(); s != (Stats{}) {
			t.Errorf("Stats() after Close and Done = %+v, want zero", s)
		}
	})
}

func TestTicketDoneIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "*", Parallelism: 1}), 8)
		ctx := t.Context()
		for i := range 3 {
			if err := g.Put(ctx, "a.com", req{"a.com", i}); err != nil {
				t.Fatal(err)
			}
		}
		_, tk, err := g.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(Result{StatusCode: 200})
		tk.Done(Result{StatusCode: 200})
		var zero Ticket
		zero.Done(Result{})
		(*Ticket)(nil).Done(Result{})
		_, tk2, err := g.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s := g.Stats(); s.InFlight != 1 {
			t.Errorf("Stats().InFlight = %d after a double Done and a Get, want 1", s.InFlight)
		}
		// Parallelism 1 still holds: the third item must wait for tk2.
		third := make(chan struct{})
		go func() {
			if _, _, err := g.Get(ctx); err == nil {
				close(third)
			}
		}()
		synctest.Wait()
		select {
		case <-third:
			t.Fatal("third Get started while the second request was in flight (Parallelism 1)")
		default:
		}
		tk2.Done(Result{StatusCode: 200})
		<-third
	})
}

func TestIdleHostsEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](New(IdleTimeout(time.Minute)), 8)
		for i := range 1000 {
			serial(t, g, fmt.Sprintf("h%d.com", i), 0, Result{StatusCode: 200})
		}
		// One host is under a long Retry-After: it must be kept.
		serial(t, g, "held.com", 0, Result{StatusCode: 429, RetryAfter: 5 * time.Minute})
		heldUntil := time.Now().Add(5 * time.Minute)
		if n := g.Stats().Hosts; n != 1001 {
			t.Fatalf("Stats().Hosts = %d, want 1001", n)
		}
		<-time.After(2 * time.Minute) // virtual time
		serial(t, g, "new.com", 0, Result{StatusCode: 200})
		if n := g.Stats().Hosts; n != 2 {
			t.Errorf("Stats().Hosts = %d after 2 idle minutes, want 2 (held.com, new.com)", n)
		}
		if start := serial(t, g, "held.com", 0, Result{StatusCode: 200}); start.Before(heldUntil) {
			t.Errorf("held.com started %v before its Retry-After ended", heldUntil.Sub(start))
		}
	})
}

func TestRulesAddedLaterApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New()
		g := NewGate[req](l, 8)
		a := serial(t, g, "a.com", 0, Result{StatusCode: 200})
		b := serial(t, g, "a.com", 0, Result{StatusCode: 200})
		if b.Sub(a) != 0 {
			t.Fatalf("unlimited host waited %v", b.Sub(a))
		}
		if err := l.Add(&Rule{DomainGlob: "a.com", Delay: time.Second}); err != nil {
			t.Fatal(err)
		}
		c := serial(t, g, "a.com", 0, Result{StatusCode: 200})
		d := serial(t, g, "a.com", 0, Result{StatusCode: 200})
		if gap := d.Sub(c); gap != time.Second {
			t.Errorf("gap after Add = %v, want 1s", gap)
		}
	})
}

func TestZeroValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Limiter
		l.SetCrawlDelay("a.com", 100*ms)
		if err := l.Add(&Rule{DomainGlob: "b.com", Delay: 50 * ms}); err != nil {
			t.Fatalf("Add() on zero Limiter error = %v", err)
		}
		g := NewGate[req](&l, 0)
		rec := simulate(t, g, reqs(3, "a.com", "b.com"), 4, fixed(ms))
		if gap := rec.minGap("a.com"); gap != 100*ms {
			t.Errorf("zero Limiter: a.com gap = %v, want the Crawl-delay 100ms", gap)
		}
		if gap := rec.minGap("b.com"); gap != 50*ms {
			t.Errorf("zero Limiter: b.com gap = %v, want the rule's 50ms", gap)
		}

		var zg Gate[int]
		if err := zg.Put(t.Context(), "a.com", 1); err != nil {
			t.Fatalf("zero Gate Put() error = %v", err)
		}
		if v, tk, err := zg.Get(t.Context()); err != nil || v != 1 {
			t.Fatalf("zero Gate Get() = %v, %v, want 1, nil", v, err)
		} else {
			tk.Done(Result{StatusCode: 200})
		}
		if got := zg.Close(); len(got) != 0 {
			t.Errorf("zero Gate Close() = %v, want empty", got)
		}
		var closed Gate[int]
		closed.Close()
		if err := closed.Put(t.Context(), "a.com", 1); !errors.Is(err, ErrClosed) {
			t.Errorf("Put() after Close on zero Gate error = %v, want %v", err, ErrClosed)
		}
	})
}
