package limits

import (
	"context"
	"time"
)

// Shared holds per-host politeness state outside the process, so that
// several crawler processes (each with its own Gate) together keep a host's
// Delay and Parallelism. storage/redisstore.HostLimiter implements it.
//
// Acquire must not block beyond one round trip to the shared state. It
// either grants a start now, atomically for every process sharing the
// state: a slot of host's parallelism is taken (parallelism <= 0: no limit
// on requests in flight) and host's next start is moved to now+delay
// (delay <= 0: none), returning a non-nil release that frees the slot; or it
// grants nothing and returns how long to wait before asking again (wait >
// 0, release nil). On error it grants nothing. release is called exactly
// once, when the request ends, and may be called from any goroutine; a slot
// whose release is lost (a crashed process) must come back by itself after
// a while. Implementations must be safe for concurrent use.
type Shared interface {
	Acquire(ctx context.Context, host string, delay time.Duration, parallelism int) (release func(), wait time.Duration, err error)
}

// SharedBackoff is how long a Gate holds a host after its Shared returned
// an error, before asking again: long enough not to hammer a shared store
// that is down, short enough that a blip costs little.
const SharedBackoff = time.Second

// sharedCfg is what SetShared installs; immutable once stored.
type sharedCfg struct {
	s     Shared
	onErr func(host string, err error)
}

// WithShared makes the Limiter consult s before each request start of a
// host that has a per-host limit; see Limiter.SetShared.
func WithShared(s Shared, onError func(host string, err error)) Option {
	return func(l *Limiter) { l.SetShared(s, onError) }
}

// SetShared makes every Gate over l ask s, just before a request start, for
// each host with a per-host limit (a Parallelism, a Delay or RandomDelay, a
// Crawl-delay or an AutoThrottle rule); hosts without one never reach s and
// cost nothing extra. The Gate's own per-host limits still apply, so s only
// ever makes a host wait longer. When s says wait, that host is parked until
// then while other hosts go on. When s fails, the host is held for
// SharedBackoff, Stats.SharedErrors counts it and onError (if not nil) is
// called with the host and the error, outside the Gate's lock and from the
// goroutine calling Gate.Get; it must not call back into the Gate. A nil s
// turns sharing off. Takes effect from the next request start.
func (l *Limiter) SetShared(s Shared, onError func(host string, err error)) {
	if s == nil {
		l.shared.Store(nil)
		return
	}
	l.shared.Store(&sharedCfg{s: s, onErr: onError})
}

// ask runs Shared.Acquire for the ready, startable host h on behalf of Get.
// It is called with g.mu held and returns with it held, having dropped it
// for the call, which is a network round trip. Meanwhile h is marked asking,
// so no other Get takes from it and place leaves it alone; a slot of its
// TotalParallelism group is kept for it. On a grant it returns the item and
// its Ticket with ok set; otherwise h is parked again and the caller
// restarts its scan (err is set only when Get must return it).
func (g *Gate[T]) ask(ctx context.Context, h *host[T], cfg *sharedCfg, gap time.Duration) (v T, t *Ticket, ok bool, err error) {
	g.unplace(h)
	h.asking = true
	grp := h.grp
	if grp != nil {
		grp.inflight++
	}
	par := h.par()
	g.mu.Unlock()
	release, wait, aerr := cfg.s.Acquire(ctx, h.key, gap, par)
	if aerr == nil && release == nil && wait <= 0 {
		// A Shared that grants nothing must say for how long; do not spin.
		wait = time.Millisecond
	}
	g.mu.Lock()
	h.asking = false
	if grp != nil {
		grp.inflight--
	}
	if g.closed || ctx.Err() != nil {
		// Close has taken h's items; or Get is giving up.
		if release != nil {
			g.mu.Unlock()
			release()
			g.mu.Lock()
		}
		if g.closed {
			return v, nil, false, ErrClosed
		}
		g.afterAsk(h, grp)
		return v, nil, false, ctx.Err()
	}
	c := g.clock()
	if release != nil {
		v, t = g.take(h, c, gap)
		t.free = release
		return v, t, true, nil
	}
	if aerr != nil {
		g.sharedErrs++
		wait = SharedBackoff
	}
	h.sharedAt = c.now().Add(wait)
	g.afterAsk(h, grp)
	if aerr != nil && cfg.onErr != nil {
		g.mu.Unlock()
		cfg.onErr(h.key, aerr)
		g.mu.Lock()
	}
	return v, nil, false, nil
}

// afterAsk files h again after an ask that started nothing, and lets hosts
// waiting for the group slot h was keeping try again.
func (g *Gate[T]) afterAsk(h *host[T], grp *group[T]) {
	c := g.clock()
	g.place(h, c)
	if grp != nil && grp.inflight == grp.cap-1 {
		for w := grp.wait.head; w != nil; w = grp.wait.head {
			g.place(w, c)
			if w.at == inGroup {
				break
			}
		}
	}
	wake(&g.getWake)
}

// needsShared reports whether h's starts go through Shared: only hosts with
// a per-host limit, so unlimited hosts stay on the O(1) path.
func (h *host[T]) needsShared(gap time.Duration) bool {
	return gap > 0 || h.par() > 0
}
