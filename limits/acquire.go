package limits

import (
	"context"
	"slices"
	"time"
)

// acquirer is an open Gate, without its type parameter, as the Limiter
// keeps it for Acquire.
type acquirer interface {
	// has reports whether the Gate keeps state for key.
	has(key string) bool
	acquire(ctx context.Context, k slotKey, host string) (*Ticket, error)
}

// register adds g to the open Gates Acquire may use.
func (l *Limiter) register(g acquirer) {
	l.gatesMu.Lock()
	defer l.gatesMu.Unlock()
	l.gates = append(l.gates, g)
}

// unregister forgets g once it is closed.
func (l *Limiter) unregister(g acquirer) {
	l.gatesMu.Lock()
	defer l.gatesMu.Unlock()
	l.gates = slices.DeleteFunc(l.gates, func(o acquirer) bool { return o == g })
}

// Acquire waits until host (host:port) may start a request that does not
// go through a Gate's Put and Get, such as its robots.txt fetch, and starts
// it: the request takes its place in the host's Delay, RandomDelay,
// Crawl-delay, hold and Parallelism like any other, in the slot its
// Politeness keys it to (so under PolitenessIP it may look the name up
// first, and fails with an error wrapping ErrResolve when that fails). The caller reports
// Ticket.Sent when the request reaches the server, and must call Ticket.Done
// when it ends.
//
// The host's state is the open Gate's that already keeps the host, else the
// newest open Gate's (made by NewGate), so that the host's next requests
// through that Gate are spaced from this one. With no open Gate, Acquire
// uses a Gate of its own, closed when the Ticket is Done, so that the start
// stays with the Limiter for the next Gate. Shared (several processes) is
// not asked: such a start is spaced within this process only. Acquire
// returns ctx.Err() when ctx ends first.
func (l *Limiter) Acquire(ctx context.Context, host string) (*Ticket, error) {
	k, err := l.keyOf(ctx, host)
	if err != nil {
		return nil, err
	}
	for {
		l.gatesMu.Lock()
		gates := slices.Clone(l.gates)
		l.gatesMu.Unlock()
		var g acquirer
		for i := len(gates) - 1; i >= 0; i-- {
			if gates[i].has(k.key) {
				g = gates[i]
				break
			}
		}
		if g == nil && len(gates) > 0 {
			g = gates[len(gates)-1]
		}
		if g == nil {
			own := NewGate[struct{}](l, 1)
			own.SetAwaitSent(true)
			t, err := own.acquire(ctx, k, host)
			if err != nil {
				own.Close()
				return nil, err
			}
			t.end = func() { own.Close() }
			return t, nil
		}
		t, err := g.acquire(ctx, k, host)
		if err == ErrClosed {
			continue // that Gate closed meanwhile: pick again
		}
		return t, err
	}
}

// has implements acquirer.
func (g *Gate[T]) has(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.hosts[key]
	return ok && !g.closed
}

// acquire implements acquirer: it waits, as Get does for a parked item,
// until the slot of k, host's, may start, and starts a request to it.
func (g *Gate[T]) acquire(ctx context.Context, k slotKey, host string) (*Ticket, error) {
	g.mu.Lock()
	g.init()
	for {
		if g.closed {
			g.mu.Unlock()
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			g.mu.Unlock()
			return nil, err
		}
		c := g.clock()
		// Looked up each time: an idle host may have been evicted while
		// this call waited, and a new one made by Put.
		h := g.hostFor(k, host, c)
		if !h.asking {
			g.place(h, c) // refreshes its rule when the rules changed
			h.crawl = g.crawlOf(h)
			if g.startableNow(h, c) {
				t := g.start(h, c, h.gap())
				g.mu.Unlock()
				return t, nil
			}
		}
		at := h.startAt()
		if err := g.wait(ctx, at.Sub(c.now()), c.future(at)); err != nil {
			return nil, err
		}
	}
}

// hostFor returns the Gate's state for the slot k, making it (with what the
// Limiter remembers of it) if there is none, with member among its hosts;
// called under mu.
func (g *Gate[T]) hostFor(k slotKey, member string, c *clock) *host[T] {
	h := g.hosts[k.key]
	if h == nil {
		// New hosts are how the map grows, so sweep idle ones here.
		g.evict(c)
		h = &host[T]{key: k.key, idx: -1}
		recall(g.lim, h)
		if k.joint {
			h.joint = &joint{addr: k.addr}
			h.ent, h.ver = k.ent, g.lim.version.Load()
		} else {
			h.crawl = g.lim.crawlDelay(k.key)
			h.ent, h.ver = g.lim.lookup(k.key)
		}
		h.grp = g.groupFor(h.ent)
		g.hosts[k.key] = h
	}
	if j := h.joint; j != nil {
		if _, ok := j.members[member]; !ok {
			if j.members == nil {
				j.members = make(map[string]struct{})
			}
			j.members[member] = struct{}{}
			h.crawl = g.crawlOf(h)
		}
	}
	return h
}

// crawlOf is h's robots.txt Crawl-delay: its host's, or for a joint slot
// the longest of its hosts', so that the server they share is spaced as
// the most demanding of them asked; called under mu.
func (g *Gate[T]) crawlOf(h *host[T]) time.Duration {
	j := h.joint
	if j == nil {
		return g.lim.crawlDelay(h.key)
	}
	if g.lim.nCrawl.Load() == 0 {
		return 0
	}
	if v := g.lim.crawlVer.Load(); j.crawlVer != v || j.crawlN != len(j.members) {
		j.crawl = g.lim.longestCrawlDelay(j.members)
		j.crawlVer, j.crawlN = v, len(j.members)
	}
	return j.crawl
}

// startableNow reports whether h may start a request now, wherever it is
// filed; called under mu.
func (g *Gate[T]) startableNow(h *host[T], c *clock) bool {
	if p := g.par(h); p > 0 && h.inflight >= p {
		return false
	}
	if h.unsent > 0 || c.future(h.startAt()) {
		return false
	}
	return h.grp == nil || h.grp.inflight < h.grp.cap
}

// wait sleeps, with g.mu held on entry and released meanwhile, until the
// gate is woken (a host may start, see getWake), d has passed (when timed),
// the gate closes, or ctx ends. It returns with g.mu held, except when ctx
// ended: then it returns ctx's error with g.mu released.
func (g *Gate[T]) wait(ctx context.Context, d time.Duration, timed bool) error {
	var tick <-chan time.Time
	if timed {
		timer := time.NewTimer(d)
		defer timer.Stop()
		tick = timer.C
	}
	if g.getWake == nil {
		g.getWake = make(chan struct{})
	}
	wake, done := g.getWake, g.done
	g.mu.Unlock()
	select {
	case <-wake:
	case <-tick:
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	return nil
}
