package limits

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"
)

// place says which structure of the Gate holds a host.
type place uint8

const (
	nowhere place = iota // busy: in flight at its parallelism, or nothing parked
	inReady              // has parked items and may start now
	inTimed              // has parked items, waits for its delay or hold
	inGroup              // has parked items, waits for its rule's TotalParallelism
	inIdle               // nothing parked, nothing in flight: evictable
)

// host is the scheduling state of one slot inside a Gate: a host:port, or
// a domain or address that several hosts share (joint).
type host[T any] struct {
	key string
	q   fifo[item[T]]

	inflight int
	// unsent counts requests taken with a gap whose Ticket has reported
	// neither Sent nor Done: until they reach the wire, nobody knows when
	// the gap ends, so the host starts nothing else.
	unsent int
	// nextStart is the earliest start the delay allows; hold the earliest
	// start Retry-After or back-off allows.
	nextStart time.Time
	hold      time.Time

	ent   *entry // matching rule, nil for none
	ver   uint64 // Limiter.version ent was resolved at
	grp   *group[T]
	crawl time.Duration // robots.txt Crawl-delay as of the last start
	adapt time.Duration // AutoThrottle's current delay
	// learned is set once AutoThrottle has seen a latency.
	learned bool
	// strikes counts 429/503 responses not yet paid back by successes.
	strikes int
	// sharedAt is the earliest start the Shared state allows, as last told.
	sharedAt time.Time
	// asking is set while a Get asks Shared for h's next start; h is then
	// nowhere and nobody else takes from it.
	asking bool
	// cool holds, in ascending order, when each slot of a DelayPerSlot
	// host that finished a request may start the next one; such a slot
	// counts as in flight until then (see slotGap).
	cool []time.Time

	at         place
	prev, next *host[T] // links in the ready, group or idle list
	idx        int      // index in the timed heap
	idleSince  time.Time

	// joint is set when the key is a domain or an address that several
	// hosts may share (see Politeness); nil for a host keyed by itself.
	joint *joint
}

// joint is what a slot that several hosts share keeps besides the state
// of a host.
type joint struct {
	// addr is the address keyed by PolitenessIP, the zero Addr for a
	// domain.
	addr netip.Addr
	// members are the hosts whose requests entered the slot since it was
	// made, for their Crawl-delays.
	members map[string]struct{}
	// crawl is the longest Crawl-delay of members, as of the Limiter's
	// crawlVer and the number of members below.
	crawl    time.Duration
	crawlVer uint64
	crawlN   int
}

// group is the shared TotalParallelism cap of one rule.
type group[T any] struct {
	cap      int
	inflight int
	wait     hlist[T]
}

// delay is the host's least gap between starts, before jitter.
func (h *host[T]) delay() time.Duration {
	var d time.Duration
	e := h.ent
	if e != nil {
		d = e.delay
		if e.auto {
			d = max(d, h.adapt)
		}
	}
	if h.crawl > 0 && (e == nil || !e.ignoreCrawl) {
		d = max(d, h.crawl)
	}
	return d
}

// par is the most requests in flight to the host, 0 for no limit.
func (h *host[T]) par() int {
	e := h.ent
	if e != nil && e.par > 0 {
		return e.par
	}
	if e != nil && e.auto {
		// The adapted delay, not a semaphore, sets the pace; until the
		// first response there is nothing to adapt to, so probe with one.
		if !h.learned {
			return 1
		}
		return 0
	}
	if h.delay() > 0 || (e != nil && e.random > 0) {
		return 1
	}
	return 0
}

// perSlot reports whether h's rule spaces requests per slot (DelayPerSlot).
func (h *host[T]) perSlot() bool { return h.ent != nil && h.ent.perSlot }

// gap is the time from one start to the earliest next start. A DelayPerSlot
// host has none but its Crawl-delay: its slots wait slotGap instead.
func (h *host[T]) gap() time.Duration {
	if h.perSlot() {
		if h.crawl > 0 && !h.ent.ignoreCrawl {
			return h.crawl
		}
		return 0
	}
	d := h.delay()
	if h.ent != nil && h.ent.random > 0 {
		d += time.Duration(rand.Int64N(int64(h.ent.random)))
	}
	return d
}

// slotGap is how long a DelayPerSlot host's slot waits after its request
// ends: Delay plus a fresh draw of RandomDelay, as Colly sleeps in the slot.
func (h *host[T]) slotGap() time.Duration {
	e := h.ent
	d := e.delay
	if e.random > 0 {
		d += time.Duration(rand.Int64N(int64(e.random)))
	}
	return d
}

// addCool keeps a slot busy until at.
func (h *host[T]) addCool(at time.Time) {
	i := len(h.cool)
	for i > 0 && h.cool[i-1].After(at) {
		i--
	}
	h.cool = slices.Insert(h.cool, i, at)
}

// cooling drops the slots whose wait has passed by now and returns how many
// still wait.
func (h *host[T]) cooling(now time.Time) int {
	i := 0
	for i < len(h.cool) && !h.cool[i].After(now) {
		i++
	}
	if i > 0 {
		h.cool = slices.Delete(h.cool, 0, i)
	}
	return len(h.cool)
}

func (h *host[T]) startAt() time.Time {
	t := h.nextStart
	if p := h.par(); len(h.cool) > 0 && p > 0 && h.inflight+len(h.cool) >= p {
		// Every slot is busy or waiting: the first to end its wait.
		t = later(t, h.cool[0])
	}
	if h.hold.After(t) {
		t = h.hold
	}
	if h.sharedAt.After(t) {
		t = h.sharedAt
	}
	return t
}

// fifo is a growable ring buffer.
type fifo[E any] struct {
	buf  []E
	head int
	n    int
}

func (f *fifo[E]) len() int { return f.n }

func (f *fifo[E]) push(e E) {
	if f.n == len(f.buf) {
		nb := make([]E, max(4, 2*len(f.buf)))
		for i := range f.n {
			nb[i] = f.buf[(f.head+i)%len(f.buf)]
		}
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.n)%len(f.buf)] = e
	f.n++
}

func (f *fifo[E]) pop() E {
	var zero E
	e := f.buf[f.head]
	f.buf[f.head] = zero
	f.head = (f.head + 1) % len(f.buf)
	f.n--
	if f.n == 0 {
		f.head = 0
		if len(f.buf) > 64 {
			f.buf = nil // give back a burst's memory
		}
	}
	return e
}

// hlist is an intrusive doubly linked list of hosts; a host is in at most
// one list at a time (its place says which).
type hlist[T any] struct {
	head, tail *host[T]
	n          int
}

func (l *hlist[T]) pushBack(h *host[T]) {
	h.prev, h.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = h
	} else {
		l.head = h
	}
	l.tail = h
	l.n++
}

func (l *hlist[T]) remove(h *host[T]) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		l.tail = h.prev
	}
	h.prev, h.next = nil, nil
	l.n--
}

// timedHeap is a min-heap of hosts by startAt.
type timedHeap[T any] []*host[T]

func (hp timedHeap[T]) less(i, j int) bool { return hp[i].startAt().Before(hp[j].startAt()) }

func (hp timedHeap[T]) swap(i, j int) {
	hp[i], hp[j] = hp[j], hp[i]
	hp[i].idx, hp[j].idx = i, j
}

func (hp *timedHeap[T]) push(h *host[T]) {
	h.idx = len(*hp)
	*hp = append(*hp, h)
	hp.up(h.idx)
}

func (hp *timedHeap[T]) remove(i int) {
	s := *hp
	last := len(s) - 1
	if i != last {
		s.swap(i, last)
	}
	s[last].idx = -1
	s[last] = nil
	*hp = s[:last]
	if i != last {
		if !hp.down(i) {
			hp.up(i)
		}
	}
}

func (hp timedHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !hp.less(i, p) {
			return
		}
		hp.swap(i, p)
		i = p
	}
}

func (hp timedHeap[T]) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(hp) {
			break
		}
		m := l
		if r := l + 1; r < len(hp) && hp.less(r, l) {
			m = r
		}
		if !hp.less(m, i) {
			break
		}
		hp.swap(i, m)
		i = m
	}
	return i > start
}
