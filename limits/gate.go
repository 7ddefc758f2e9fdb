package limits

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxParked is the Gate capacity used when NewGate gets maxParked <= 0.
const DefaultMaxParked = 1024

// ParkedPerHost is the room a Gate makes for parked items for each host
// with items parked past the first, on top of its maxParked: a crawl of
// thousands of hosts with a Delay each needs an item parked for every host
// whose turn comes, and a fixed capacity below the number of hosts leaves
// most of them idle while their requests wait behind the full Gate (256
// items for 2,000 hosts of Delay 200 ms: at most 1,280 of the 10,000
// starts a second the delays allow). The feeder serves the frontier in
// order, and a frontier holds each host's links in runs (a page links
// mostly to its own host), so a host needs room for several Delays of work
// or it runs dry while the feeder passes over another's run: at 200 hosts
// of 50 pages, 4 items per host gave 505 pages/s, 16 gave 679 and 64 gave
// 700 (bench broad scenario). The engine's in-memory frontier keeps a host
// that has ParkedPerHost items out of the Gate from taking the room a
// newly found host needs. Parked requests of the in-memory frontier
// count against MaxPending all the same, so the room costs no memory
// there; a queue run leases within its own look-ahead.
const ParkedPerHost = 16

// Gate parks items until their host may start another request, so that a
// waiting request holds no worker. It holds at most maxParked items, plus
// ParkedPerHost for each host past the first that has items parked, so
// that memory stays bounded by the hosts with work waiting, and by
// maxParked while one host has it all. Items
// of one host come out in Put order; ready hosts take turns. The zero value
// is a Gate over New() with DefaultMaxParked, like NewGate(nil, 0). Safe for
// concurrent use. The Gate starts no goroutine; its owner Closes it to wake
// blocked callers and get back what is still parked.
type Gate[T any] struct {
	// mu guards everything below, and every host and group.
	mu        sync.Mutex
	lim       *Limiter
	maxParked int
	done      chan struct{} // closed by Close
	closed    bool
	hosts     map[string]*host[T]
	groups    map[*entry]*group[T]
	ready     hlist[T]
	idle      hlist[T]
	timed     timedHeap[T]
	parked    int
	// queued is the number of hosts with items parked.
	queued   int
	inflight int
	seq      uint64
	releases uint64
	// sharedErrs counts failed Shared.Acquire calls.
	sharedErrs uint64
	// hostCap caps requests in flight to a host no rule limits (0: none).
	hostCap int
	// awaitSent makes a host with a gap wait for Ticket.Sent (or Done)
	// before its next start; see SetAwaitSent.
	awaitSent bool
	// seen is the latest time any operation read; see clock.
	seen time.Time
	// getWake and putWake are closed (and cleared) to wake every blocked
	// Get or Put; nil while nobody waits, so the fast path makes none.
	getWake chan struct{}
	putWake chan struct{}
}

type item[T any] struct {
	v   T
	seq uint64
}

// NewGate returns a Gate over lim that parks at most maxParked items
// (<= 0: DefaultMaxParked), plus ParkedPerHost for each host past the
// first with items parked. A nil lim means New().
func NewGate[T any](lim *Limiter, maxParked int) *Gate[T] {
	g := &Gate[T]{lim: lim, maxParked: maxParked}
	g.init()
	g.lim.register(g)
	return g
}

// init fills in defaults, so that the zero Gate works; called under mu (or
// before the Gate is shared).
func (g *Gate[T]) init() {
	if g.done != nil {
		return
	}
	if g.maxParked <= 0 {
		g.maxParked = DefaultMaxParked
	}
	if g.lim == nil {
		g.lim = New()
	}
	g.done = make(chan struct{})
	g.hosts = make(map[string]*host[T])
	g.groups = make(map[*entry]*group[T])
}

// Put parks v, a request to host (host:port, as in url.URL.Host), in the
// slot of host's politeness key: host itself by default, its domain or its
// address when the Politeness of its rule (or the Limiter's default) says
// so, which under PolitenessIP may look its name up first (outside the
// Gate's lock). It blocks while the gate is full, and returns ctx.Err(),
// ErrClosed, or for a name PolitenessIP cannot resolve an error wrapping
// ErrResolve, when it gives up (v is then not parked).
func (g *Gate[T]) Put(ctx context.Context, host string, v T) error {
	return g.PutAfter(ctx, host, v, time.Time{})
}

// PutAfter is Put with a time before which the host starts nothing: the
// host's next start becomes notBefore if that is later. A queue run gives
// it the ready time a shared store keeps for the host (set by this run
// before a crash, or by another consumer), so that a host is not fetched
// sooner than its Delay allows across processes.
func (g *Gate[T]) PutAfter(ctx context.Context, host string, v T, notBefore time.Time) error {
	g.mu.Lock()
	g.init()
	k := slotKey{key: host}
	if lim := g.lim; lim.keying() {
		g.mu.Unlock()
		var err error
		if k, err = lim.keyOf(ctx, host); err != nil {
			return err
		}
		g.mu.Lock()
	}
	for g.parked >= g.room() && !g.closed {
		if g.putWake == nil {
			g.putWake = make(chan struct{})
		}
		wake, done := g.putWake, g.done
		g.mu.Unlock()
		select {
		case <-wake:
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	c := g.clock()
	h := g.hostFor(k, host, c)
	later := notBefore.After(h.nextStart)
	if later {
		h.nextStart = notBefore
	}
	if h.q.len() == 0 {
		g.queued++
		// The room grew: another Put waiting for it may go on.
		wake(&g.putWake)
	}
	g.seq++
	h.q.push(item[T]{v: v, seq: g.seq})
	g.parked++
	if h.q.len() == 1 || later || h.ver != g.lim.version.Load() {
		g.place(h, c)
		if h.at == inReady || h.at == inTimed {
			wake(&g.getWake)
		}
	}
	g.mu.Unlock()
	return nil
}

// Get blocks until a parked item's host may start a request, takes that
// host's slot and returns the item with its Ticket, whose Done the caller
// must call when the request ends. The start of the request, for Delay, is
// now. Items of one host come out in Put order; hosts do not wait for each
// other. It returns ctx.Err() or ErrClosed when it gives up.
func (g *Gate[T]) Get(ctx context.Context) (T, *Ticket, error) {
	var zero T
	g.mu.Lock()
	g.init()
scan:
	for {
		if g.closed {
			g.mu.Unlock()
			return zero, nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			g.mu.Unlock()
			return zero, nil, err
		}
		c := g.clock()
		for len(g.timed) > 0 && !c.future(g.timed[0].startAt()) {
			g.place(g.timed[0], c)
		}
		for h := g.ready.head; h != nil; h = g.ready.head {
			if !g.startable(h, c) {
				g.place(h, c)
				continue
			}
			h.crawl = g.crawlOf(h)
			gap := h.gap()
			if cfg := g.lim.shared.Load(); cfg != nil && h.needsShared(gap) {
				v, t, ok, err := g.ask(ctx, h, cfg, gap)
				if ok || err != nil {
					g.mu.Unlock()
					return v, t, err
				}
				// The lock was dropped: rescan from the top.
				continue scan
			}
			v, t := g.take(h, c, gap)
			g.mu.Unlock()
			return v, t, nil
		}
		var next time.Duration
		if len(g.timed) > 0 {
			next = g.timed[0].startAt().Sub(c.now())
		}
		if err := g.wait(ctx, next, len(g.timed) > 0); err != nil {
			return zero, nil, err
		}
	}
}

// room is how many items the Gate may hold: maxParked, plus ParkedPerHost
// for each host past the first with items parked; called under mu.
func (g *Gate[T]) room() int {
	return g.maxParked + ParkedPerHost*max(g.queued-1, 0)
}

// take starts a request to the ready host h, whose next start is gap away
// (h.gap(), drawn once so that Shared and the Gate agree on it).
func (g *Gate[T]) take(h *host[T], c *clock, gap time.Duration) (T, *Ticket) {
	it := h.q.pop()
	g.parked--
	if h.q.len() == 0 {
		g.queued--
	}
	t := g.start(h, c, gap)
	wake(&g.putWake)
	return it.v, t
}

// start starts a request to h, whose next start is gap away, and returns
// its Ticket; called under mu by take and acquire.
func (g *Gate[T]) start(h *host[T], c *clock, gap time.Duration) *Ticket {
	g.inflight++
	h.inflight++
	if h.grp != nil {
		h.grp.inflight++
	}
	t := &Ticket{g: g, h: h, grp: h.grp}
	if h.perSlot() {
		t.slotGap = h.slotGap()
	}
	if gap > 0 {
		// Measured from now until the request reaches the wire (Sent),
		// and meanwhile the host starts nothing else.
		h.nextStart = c.now().Add(gap)
		t.gap, t.unsent = gap, true
		t.serial = g.par(h) == 1
		if g.awaitSent {
			h.unsent++
			t.holds = true
		}
	}
	if h.ent != nil && h.ent.auto {
		t.start = c.now() // for Results that carry no Latency
	}
	// Re-placing moves a still-ready host to the back: ready hosts take turns.
	g.place(h, c)
	return t
}

// release ends the request of t; it implements releaser.
func (g *Gate[T]) release(t *Ticket, res Result) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	h := t.h.(*host[T])
	g.inflight--
	h.inflight--
	if t.holds {
		// Never sent (a cache hit, an abort, a failed dial): the gap
		// stays measured from Get.
		t.holds = false
		h.unsent--
	}
	var freed *group[T]
	if grp, _ := t.grp.(*group[T]); grp != nil {
		if grp.inflight == grp.cap {
			freed = grp
		}
		grp.inflight--
	}
	if g.closed {
		return
	}
	c := g.clock()
	if t.slotGap > 0 {
		h.addCool(c.now().Add(t.slotGap))
	}
	lat := res.Latency
	if lat <= 0 && res.Err == nil && !t.start.IsZero() {
		lat = c.now().Sub(t.start)
	}
	h.observe(res, lat, c, g.lim)
	g.place(h, c)
	if freed != nil {
		for w := freed.wait.head; w != nil; w = freed.wait.head {
			g.place(w, c)
			if w.at == inGroup {
				break // the group is full again
			}
		}
	}
	wake(&g.getWake)
	if g.releases++; g.releases%evictEvery == 0 {
		g.evict(c)
	}
}

// par is h's most requests in flight, 0 for no limit: its rule's, or the
// Gate's host cap for a host no rule limits.
func (g *Gate[T]) par(h *host[T]) int {
	if p := h.par(); p > 0 {
		return p
	}
	return g.hostCap
}

// SetHostCap caps at n the requests in flight to each host that no rule
// limits (no Parallelism, no delay, or an AutoThrottle rule that has
// learned its host), so that a download pool sized by the limits still
// has a bound for such hosts. n <= 0 removes the cap (the default). Hosts
// capped only this way never reach Shared. Takes effect from the next Get.
func (g *Gate[T]) SetHostCap(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	g.hostCap = max(n, 0)
	wake(&g.getWake)
}

// SetAwaitSent makes a host that has a gap (Delay, RandomDelay,
// Crawl-delay, AutoThrottle) start nothing else between a Get and that
// Ticket's Sent or Done, so that its next start is measured from the
// moment the request reached the wire even when Parallelism allows
// several in flight. Callers that report Sent promptly should turn it on;
// without it Sent still moves the next start, but a second request may
// leave the Gate before the first has reported. Takes effect from the next
// Get.
func (g *Gate[T]) SetAwaitSent(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	g.awaitSent = on
}

// startable reports whether h, now in the ready list, may start at once.
func (g *Gate[T]) startable(h *host[T], c *clock) bool {
	if h.ver != g.lim.version.Load() {
		return false
	}
	if p := g.par(h); p > 0 && h.inflight+h.cooling(c.now()) >= p {
		return false
	}
	if h.unsent > 0 || c.future(h.startAt()) {
		return false
	}
	return h.grp == nil || h.grp.inflight < h.grp.cap
}

// unplace takes h out of whatever structure holds it.
func (g *Gate[T]) unplace(h *host[T]) {
	switch h.at {
	case inReady:
		g.ready.remove(h)
	case inIdle:
		g.idle.remove(h)
	case inGroup:
		h.grp.wait.remove(h)
	case inTimed:
		g.timed.remove(h.idx)
	}
	h.at = nowhere
}

// place files h where its state says it belongs, refreshing its rule first
// if the rules changed.
func (g *Gate[T]) place(h *host[T], c *clock) {
	g.unplace(h)
	if h.asking {
		return // ask files it when Shared has answered
	}
	if v := g.lim.version.Load(); h.ver != v {
		if h.joint == nil {
			h.ent, h.ver = g.lim.lookup(h.key)
		} else {
			// A joint key names its rule (jointKey): rules added later
			// apply to the hosts' next keys, not to this slot.
			h.ver = v
		}
		h.grp = g.groupFor(h.ent)
	}
	switch {
	case h.q.len() == 0:
		if h.inflight == 0 {
			// A stale time is fine here: it can only make a host look
			// idle for longer, and evict re-checks what matters.
			h.at, h.idleSince = inIdle, c.stale()
			g.idle.pushBack(h)
		}
	case h.unsent > 0, g.par(h) > 0 && h.inflight >= g.par(h):
		// Ticket.Sent or Ticket.Done places it again.
	case c.future(h.startAt()):
		h.at = inTimed
		g.timed.push(h)
	case h.grp != nil && h.grp.inflight >= h.grp.cap:
		h.at = inGroup
		h.grp.wait.pushBack(h)
	default:
		h.at = inReady
		g.ready.pushBack(h)
	}
}

// evict drops hosts idle for longer than the Limiter's IdleTimeout. A host
// still under a delay or hold is kept (moved to the back) so that forgetting
// it cannot let a request start early.
func (g *Gate[T]) evict(c *clock) {
	ttl := g.lim.idle()
	now := c.now()
	for h := g.idle.head; h != nil && now.Sub(h.idleSince) >= ttl; h = g.idle.head {
		g.idle.remove(h)
		if h.startAt().After(now) {
			h.idleSince = now
			g.idle.pushBack(h)
			continue
		}
		h.at = nowhere
		delete(g.hosts, h.key)
	}
}

func (g *Gate[T]) groupFor(e *entry) *group[T] {
	if e == nil || e.total <= 0 {
		return nil
	}
	grp := g.groups[e]
	if grp == nil {
		grp = &group[T]{cap: e.total}
		g.groups[e] = grp
	}
	return grp
}

// evictEvery is how many Ticket.Done calls pass between sweeps for idle
// hosts, so the sweep's clock read stays off most of the hot path.
const evictEvery = 64

// clock reads time.Now at most once per Gate operation, and only when a
// decision needs it: a host with no delay, hold or AutoThrottle makes no
// decision that needs the time, and time.Now is far from free on some
// machines.
type clock struct {
	t    time.Time
	set  bool
	seen *time.Time // the Gate's seen, guarded by its mu
}

func (g *Gate[T]) clock() *clock { return &clock{seen: &g.seen} }

func (c *clock) now() time.Time {
	if !c.set {
		c.t, c.set = time.Now(), true
		*c.seen = c.t
	}
	return c.t
}

// stale returns the time of this operation if it has read one, else the
// latest time any operation read.
func (c *clock) stale() time.Time {
	if c.set {
		return c.t
	}
	return *c.seen
}

// future reports whether t is after now; the zero time never is, without
// reading the clock.
func (c *clock) future(t time.Time) bool { return !t.IsZero() && t.After(c.now()) }

// wake closes *ch, if anyone made it, to wake all its waiters.
func wake(ch *chan struct{}) {
	if *ch != nil {
		close(*ch)
		*ch = nil
	}
}

// Len returns the number of parked items.
func (g *Gate[T]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parked
}

// Close wakes every blocked Put and Get with ErrClosed and returns the items
// still parked, in Put order, so the caller can put them back. Tickets
// handed out before stay valid (Done is harmless). Hosts still under a
// delay or hold, or with back-off strikes or an adapted delay, are left
// with the Limiter, so that the next Gate over it keeps them (see
// Limiter). Idempotent: later calls return nil.
func (g *Gate[T]) Close() []T {
	out, closed := g.close()
	if closed {
		// Outside mu: the Limiter's lock is never taken under it.
		g.lim.unregister(g)
	}
	return out
}

// close is Close under mu; closed reports that this call closed the Gate.
func (g *Gate[T]) close() (_ []T, closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	if g.closed {
		return nil, false
	}
	g.closed = true
	close(g.done)
	all := make([]item[T], 0, g.parked)
	c := g.clock()
	for _, h := range g.hosts {
		for h.q.len() > 0 {
			all = append(all, h.q.pop())
		}
		// The next Gate over the Limiter (the next crawl) picks up
		// where this one leaves the host.
		remember(g.lim, h, c.now())
	}
	g.parked, g.queued = 0, 0
	// Tickets still out point at their host and group, so Done keeps
	// working; everything else is dropped.
	g.hosts, g.groups = nil, nil
	g.ready, g.idle, g.timed = hlist[T]{}, hlist[T]{}, nil
	slices.SortFunc(all, func(a, b item[T]) int {
		if a.seq < b.seq {
			return -1
		}
		return 1
	})
	out := make([]T, len(all))
	for i, it := range all {
		out[i] = it.v
	}
	return out, true
}

// Stats is a snapshot of a Gate, for Summary and logs.
type Stats struct {
	Parked   int `json:"parked"`    // items waiting in the gate
	InFlight int `json:"in_flight"` // tickets not yet Done
	Hosts    int `json:"hosts"`     // hosts with state kept
	Ready    int `json:"ready"`     // hosts that may start now
	Delayed  int `json:"delayed"`   // hosts waiting for a delay or hold
	Capped   int `json:"capped"`    // hosts waiting for a TotalParallelism slot
	// SharedErrors counts Shared.Acquire failures since the Gate was made.
	SharedErrors uint64 `json:"shared_errors"`
}

// Stats returns a snapshot of the gate's counters.
func (g *Gate[T]) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Parked: g.parked, InFlight: g.inflight, Hosts: len(g.hosts), Ready: g.ready.n, Delayed: len(g.timed),
		SharedErrors: g.sharedErrs}
	for _, grp := range g.groups {
		s.Capped += grp.wait.n
	}
	return s
}

// releaser is the Gate behind a Ticket, without its type parameter.
type releaser interface {
	release(*Ticket, Result)
	sent(*Ticket, time.Time)
	addr(*Ticket) netip.Addr
	nextStart(*Ticket) time.Time
}

// Ticket is a started request's claim on its host; call Done once the
// request has ended. The zero value and nil are valid no-op tickets. Safe
// for concurrent use.
type Ticket struct {
	g     releaser
	h     any // *host[T]
	grp   any // *group[T] charged at the start, nil if none
	start time.Time
	done  bool // guarded by the Gate's mu
	// gap is the host's gap drawn at the start; unsent is set until Sent
	// or Done, holds while the host waits for it (see SetAwaitSent). Both
	// guarded by the Gate's mu.
	gap    time.Duration
	unsent bool
	holds  bool
	// serial is set when the host allowed one request in flight at the
	// start; fixed when the Ticket is made.
	serial bool
	// slotGap is how long a DelayPerSlot host's slot waits after Done.
	slotGap time.Duration
	// free releases the Shared slot, if the start took one.
	free     func()
	freeOnce sync.Once
	// end, if set, runs once after the Ticket is Done (Limiter.Acquire
	// closes the Gate it made for the Ticket).
	end     func()
	endOnce sync.Once
}

// Sent reports the moment the request reached the server: the host's next
// start is then at least the gap after at, so Delay holds as the server sees
// it however long the request took to get from Get to the wire (a dial, a
// TLS handshake, callbacks). The moment the headers were written is the
// earliest the server can see a request; its first response byte is the
// latest, and the safe choice when the server may be slow to read (a new
// connection waits for the server's accept) or when nothing is lost by it
// (Serial). Until
// Sent or Done, a host with a gap starts nothing else when the Gate awaits
// Sent (SetAwaitSent). Done without Sent
// keeps the gap measured from Get. Only the first call counts, and none
// after Done. See SetAwaitSent.
func (t *Ticket) Sent(at time.Time) {
	if t == nil || t.g == nil {
		return
	}
	t.g.sent(t, at)
}

// Addr returns the address the request's host was keyed by under
// PolitenessIP, which the caller should connect to, so that the request
// reaches the server whose slot it took (a second lookup could answer
// otherwise); the zero Addr for any other key.
func (t *Ticket) Addr() netip.Addr {
	if t == nil || t.g == nil {
		return netip.Addr{}
	}
	return t.g.addr(t)
}

// addr implements releaser. A host's joint never changes once the host is
// made, before any Ticket for it, so no lock is needed.
func (g *Gate[T]) addr(t *Ticket) netip.Addr {
	if j := t.h.(*host[T]).joint; j != nil {
		return j.addr
	}
	return netip.Addr{}
}

// NextStart returns the earliest moment the request's host may start
// another request, as far as its Delay, Retry-After and back-off say
// (Parallelism aside): read after Done, it is what a queue run stores as
// the host's ready time. The zero time for a nil Ticket.
func (t *Ticket) NextStart() time.Time {
	if t == nil || t.g == nil {
		return time.Time{}
	}
	return t.g.nextStart(t)
}

// nextStart implements releaser.
func (g *Gate[T]) nextStart(t *Ticket) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := t.h.(*host[T])
	return later(h.nextStart, h.hold)
}

// HasGap reports whether the request's host had a gap (a delay) at its
// start, so that reporting Sent matters. Safe to call without locks: the
// gap is fixed when the Ticket is made.
func (t *Ticket) HasGap() bool { return t != nil && t.gap > 0 }

// Serial reports whether the request's host allowed only one request in
// flight at its start. Such a host cannot start another before this one
// is Done, so a caller loses nothing by reporting as Sent the latest
// moment the server can have seen the request (its first response byte)
// rather than the moment it was written. Fixed when the Ticket is made.
func (t *Ticket) Serial() bool { return t != nil && t.serial }

// sent implements releaser.
func (g *Gate[T]) sent(t *Ticket, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.done || !t.unsent {
		return
	}
	t.unsent = false
	h := t.h.(*host[T])
	if t.holds {
		t.holds = false
		h.unsent--
	}
	if next := at.Add(t.gap); next.After(h.nextStart) {
		h.nextStart = next
	}
	if g.closed {
		return
	}
	c := g.clock()
	g.place(h, c)
	wake(&g.getWake)
}

// Done reports the request finished and frees its host slot (and its
// Shared slot); res feeds the host's AutoThrottle, Retry-After and
// back-off. Only the first call counts.
func (t *Ticket) Done(res Result) {
	if t == nil || t.g == nil {
		return
	}
	if t.free != nil {
		// Before the local slot, so that this process's next ask for the
		// host does not find its own slot still taken; outside the Gate's
		// lock, since it is a network call.
		t.freeOnce.Do(t.free)
	}
	t.g.release(t, res)
	if t.end != nil {
		t.endOnce.Do(t.end)
	}
}

// HostStat is one host's share of a Gate: requests in flight and waiting.
type HostStat struct {
	Host     string `json:"host"`
	InFlight int    `json:"in_flight"`
	Waiting  int    `json:"waiting"`
	// Until is the host's next allowed start (its Delay, Crawl-delay or
	// AutoThrottle gap, or a Retry-After or back-off hold, whichever ends
	// later) as last computed; it may be in the past. Held is set when
	// the hold is the later.
	Until time.Time `json:"until,omitzero"`
	Held  bool      `json:"held,omitempty"`
}

// HostStats returns the hosts with requests in flight or waiting, the
// busiest first, at most max of them (max <= 0: all), so that a crawl of
// many hosts reports a bounded list.
func (g *Gate[T]) HostStats(max int) []HostStat {
	g.mu.Lock()
	var out []HostStat
	for key, h := range g.hosts {
		if h.inflight > 0 || h.q.n > 0 {
			hs := HostStat{Host: key, InFlight: h.inflight, Waiting: h.q.n, Until: h.nextStart}
			if h.hold.After(hs.Until) {
				hs.Until, hs.Held = h.hold, true
			}
			out = append(out, hs)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b HostStat) int {
		if c := cmp.Compare(b.InFlight+b.Waiting, a.InFlight+a.Waiting); c != 0 {
			return c
		}
		return strings.Compare(a.Host, b.Host)
	})
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}
