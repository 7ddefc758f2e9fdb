package storage

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"
)

var _ HostQueue = (*MemoryQueue)(nil)

// memHost is a host of a MemoryQueue: its ready time, its ready entries
// (while the queue is hosted) and its counts.
type memHost struct {
	name  string
	ready time.Time // next allowed start; zero when none was set
	// heap holds the host's ready entries by priority, then seq (entryBefore).
	heap   []*memEntry
	leased int // entries leased, by Lease or LeaseHosts
	count  int // entries not acknowledged, in any state
	place  hostPlace
	index  int // position in the heap place names
}

// hostPlace says where a host is kept.
type hostPlace uint8

const (
	// placeNone: no ready entry to hand out (or the queue is not hosted),
	// but entries leased or delayed.
	placeNone hostPlace = iota
	// placeActive: in hostState.active, ready entries and a ready time
	// reached by some LeaseHosts' now.
	placeActive
	// placeWaiting: in hostState.waiting, ready entries and a ready time
	// no LeaseHosts has reached yet.
	placeWaiting
	// placeFull: ready entries but as many leases as the limit.
	placeFull
	// placeIdle: in hostState.idle, no entries, a ready time to come.
	placeIdle
	// placeGone: forgotten, no longer in hostState.hosts.
	placeGone
)

// hostState is the MemoryQueue's per-host state. Hosts with no entries and
// no ready time to come are forgotten, so it stays linear in the hosts with
// work.
type hostState struct {
	hosts map[string]*memHost
	plain *memHost // host "", which Push looks up once per call
	// limit is the perHost of the last LeaseHosts (0: none), which decides
	// which hosts are full. A call with another perHost re-places every
	// host once.
	limit   int
	active  hostHeap // by head entry (byHead)
	waiting hostHeap // by ready time
	idle    hostHeap // by ready time
}

func newHostState() hostState {
	return hostState{
		hosts:   make(map[string]*memHost),
		active:  hostHeap{less: byHead},
		waiting: hostHeap{less: byReady},
		idle:    hostHeap{less: byReady},
	}
}

// PushHosted implements HostQueue. It returns ErrQueueFull, pushing
// nothing, when the entries would not all fit, and an error wrapping
// ErrPriorityRange, pushing nothing, for a priority outside the int32
// range. The data slices are copied.
func (q *MemoryQueue) PushHosted(ctx context.Context, entries ...HostEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, e := range entries {
		if err := CheckPriority(e.Priority); err != nil {
			return fmt.Errorf("%w: entry %d has priority %d", err, i, e.Priority)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.maxSize > 0 && q.totalLocked()+len(entries) > q.maxSize {
		return ErrQueueFull
	}
	var h *memHost
	for _, he := range entries {
		// A page's links are mostly of its host: look each run up once.
		if h == nil || h.name != he.Host {
			h = q.hostLocked(he.Host)
		}
		q.addLocked(h, 1)
		q.seq++
		q.readyPushLocked(&memEntry{seq: q.seq, data: append([]byte(nil), he.Data...), host: h, priority: int32(he.Priority), hindex: -1})
	}
	q.notifyLocked()
	return nil
}

// LeaseHosts implements HostQueue. now decides which hosts are ready;
// lease deadlines and entries' not-before times follow the clock, as in
// Lease. A call with a perHost other than the previous call's costs
// O(hosts) once. The returned Data are copies the caller may keep.
func (q *MemoryQueue) LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n <= 0 || ttl <= 0 {
		return nil, fmt.Errorf("%w: LeaseHosts(n=%d, ttl=%v)", ErrInvalidArgument, n, ttl)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	clock := time.Now()
	q.promoteLocked(clock)
	if q.nready == 0 {
		return nil, ErrQueueEmpty
	}
	q.hostedLocked()
	q.setLimitLocked(max(perHost, 0))
	for q.waiting.Len() > 0 && !q.waiting.items[0].ready.After(now) {
		h := heap.Pop(&q.waiting).(*memHost)
		h.place = placeActive
		heap.Push(&q.active, h)
	}
	out := make([]Entry, 0, min(n, q.nready))
	deadline := clock.Add(ttl)
	for len(out) < n && q.active.Len() > 0 {
		h := q.active.items[0]
		if h.ready.After(now) {
			// Made active by a consumer whose now was later than ours.
			heap.Pop(&q.active)
			h.place = placeWaiting
			heap.Push(&q.waiting, h)
			continue
		}
		for len(out) < n && len(h.heap) > 0 && !q.fullLocked(h) {
			e := h.remove(0)
			q.nready--
			if q.fifo {
				heap.Remove(&q.ready, int(e.index))
			}
			out = append(out, q.leaseLocked(e, deadline))
			if len(h.heap) > 0 && !q.stillFirstLocked(h) {
				break
			}
		}
		q.placeHostLocked(h)
	}
	q.armLocked()
	if len(out) == 0 {
		return nil, ErrQueueEmpty
	}
	return out, nil
}

// stillFirstLocked reports whether h, at the top of active, still has the
// best head: then LeaseHosts takes on from it without touching the heap.
func (q *MemoryQueue) stillFirstLocked(h *memHost) bool {
	for _, c := range q.active.items[1:min(3, len(q.active.items))] {
		if byHead(c, h) {
			return false
		}
	}
	return true
}

// SetHostReady implements HostQueue. A time earlier than the one kept for a
// host is ignored; a host with no entries is remembered only while its time
// is to come.
func (q *MemoryQueue) SetHostReady(ctx context.Context, ready map[string]time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	clock := time.Now()
	for name, t := range ready {
		if name == "" {
			continue // entries pushed without a host have no ready time
		}
		h := q.hosts[name]
		if h == nil {
			if !t.After(clock) {
				continue
			}
			h = q.hostLocked(name)
		}
		if !t.After(h.ready) {
			continue
		}
		h.ready = t
		switch h.place {
		case placeActive:
			heap.Remove(&q.active, h.index)
			h.place = placeWaiting
			heap.Push(&q.waiting, h)
		case placeWaiting:
			heap.Fix(&q.waiting, h.index)
		case placeIdle:
			heap.Fix(&q.idle, h.index)
		case placeNone:
			if h.count == 0 { // just made: idle until t
				q.placeHostLocked(h)
			}
		}
	}
	return nil
}

// Head implements HostQueue. Within a host, the entries waiting for their
// own not-before time come after the ready ones; hosts with only such
// entries come last. It costs O(hosts + delayed entries) plus O(log n) per
// entry listed once LeaseHosts has been called, O(entries) before. n <= 0
// is ErrInvalidArgument.
func (q *MemoryQueue) Head(ctx context.Context, n int) ([]HeadEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: Head(n=%d)", ErrInvalidArgument, n)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	q.promoteLocked(time.Now())
	byEntry := func(a, b *memEntry) int {
		if entryBefore(a, b) {
			return -1
		}
		return 1
	}
	delayed := make(map[*memHost][]*memEntry)
	for _, e := range q.delayed.items {
		delayed[e.host] = append(delayed[e.host], e)
	}
	for _, es := range delayed {
		slices.SortFunc(es, byEntry)
	}
	// ready lists a host's ready entries in lease order, up to k.
	var ready func(h *memHost, k int) []*memEntry
	var hosts []*memHost
	if q.hosted {
		for _, h := range q.hosts {
			if len(h.heap) > 0 {
				hosts = append(hosts, h)
			}
		}
		ready = func(h *memHost, k int) []*memEntry { return h.first(k) }
	} else {
		lists := make(map[*memHost][]*memEntry)
		for _, e := range q.ready.items {
			if lists[e.host] == nil {
				hosts = append(hosts, e.host)
			}
			lists[e.host] = append(lists[e.host], e)
		}
		ready = func(h *memHost, k int) []*memEntry {
			es := lists[h]
			slices.SortFunc(es, byEntry)
			return es[:min(k, len(es))]
		}
	}
	heads := make(map[*memHost]*memEntry, len(hosts))
	for _, h := range hosts {
		heads[h] = ready(h, 1)[0]
	}
	slices.SortFunc(hosts, func(a, b *memHost) int { return byEntry(heads[a], heads[b]) })
	var rest []*memHost
	for h, es := range delayed {
		if heads[h] == nil {
			heads[h] = es[0]
			rest = append(rest, h)
		}
	}
	slices.SortFunc(rest, func(a, b *memHost) int { return byEntry(heads[a], heads[b]) })
	out := make([]HeadEntry, 0, min(n, q.nready+q.delayed.Len()))
	for _, h := range append(hosts, rest...) {
		if len(out) == n {
			break
		}
		var es []*memEntry
		if len(h.heap) > 0 || !q.hosted {
			es = ready(h, n-len(out))
		}
		for _, e := range append(es, delayed[h]...) {
			if len(out) == n {
				break
			}
			out = append(out, HeadEntry{
				Host:      h.name,
				Priority:  int(e.priority),
				Data:      append([]byte(nil), e.data...),
				NotBefore: e.at, // zero unless delayed
				HostReady: h.ready,
			})
		}
	}
	return out, nil
}

// hostLocked returns the host named name, made (with no entries) if new.
func (q *MemoryQueue) hostLocked(name string) *memHost {
	if name == "" && q.plain != nil && q.plain.place != placeGone {
		return q.plain
	}
	h := q.hosts[name]
	if h == nil {
		h = &memHost{name: name, index: -1}
		q.hosts[name] = h
	}
	if name == "" {
		q.plain = h
	}
	return h
}

// addLocked counts k new entries of h, which stops being idle.
func (q *MemoryQueue) addLocked(h *memHost, k int) {
	h.count += k
	if h.place == placeIdle {
		q.placeHostLocked(h)
	}
}

// unleaseLocked counts a lease of h as ended (acknowledged, released or
// expired; an acknowledged entry is already uncounted).
func (q *MemoryQueue) unleaseLocked(h *memHost) {
	h.leased--
	if h.count == 0 || (q.hosted && q.limit > 0 && h.name != "" && h.leased == q.limit-1) {
		q.placeHostLocked(h)
	}
}

// hostPushLocked adds the ready entry e to its host's heap.
func (q *MemoryQueue) hostPushLocked(e *memEntry) {
	h := e.host
	h.push(e)
	if e.hindex == 0 { // a new head, maybe a host with nothing ready before
		q.placeHostLocked(h)
	}
}

// fullLocked reports whether h holds as many leases as the limit allows.
// The host "" (entries pushed without one) has no limit.
func (q *MemoryQueue) fullLocked(h *memHost) bool {
	return q.limit > 0 && h.name != "" && h.leased >= q.limit
}

// wantPlace is where h belongs.
func (q *MemoryQueue) wantPlace(h *memHost) hostPlace {
	switch {
	case q.hosted && len(h.heap) > 0:
		if q.fullLocked(h) {
			return placeFull
		}
		if h.place == placeActive {
			return placeActive
		}
		return placeWaiting
	case h.count > 0:
		return placeNone
	case h.ready.After(time.Now()):
		return placeIdle
	default:
		return placeGone
	}
}

// placeHostLocked moves h where it belongs after a change of its entries,
// its leases or the limit (SetHostReady moves hosts itself).
func (q *MemoryQueue) placeHostLocked(h *memHost) {
	want := q.wantPlace(h)
	if want == h.place {
		if want == placeActive { // its head may have changed
			heap.Fix(&q.active, h.index)
		}
		return
	}
	switch h.place {
	case placeActive:
		heap.Remove(&q.active, h.index)
	case placeWaiting:
		heap.Remove(&q.waiting, h.index)
	case placeIdle:
		heap.Remove(&q.idle, h.index)
	}
	h.place = want
	switch want {
	case placeWaiting:
		heap.Push(&q.waiting, h)
	case placeIdle:
		heap.Push(&q.idle, h)
	case placeGone:
		delete(q.hosts, h.name)
	}
}

// forgetIdleLocked forgets the hosts with no entries whose ready time has
// passed.
func (q *MemoryQueue) forgetIdleLocked(now time.Time) {
	for q.idle.Len() > 0 && !q.idle.items[0].ready.After(now) {
		h := heap.Pop(&q.idle).(*memHost)
		h.place = placeGone
		delete(q.hosts, h.name)
	}
}

// setLimitLocked makes limit the per-host limit that decides which hosts
// are full.
func (q *MemoryQueue) setLimitLocked(limit int) {
	if limit == q.limit {
		return
	}
	q.limit = limit
	for _, h := range q.hosts {
		if len(h.heap) > 0 {
			q.placeHostLocked(h)
		}
	}
}

// hostedLocked builds the hosts' heaps from the push order, and drops that
// (see MemoryQueue.fifo).
func (q *MemoryQueue) hostedLocked() {
	if q.hosted {
		return
	}
	q.hosted = true
	for _, e := range q.ready.items {
		h := e.host
		e.hindex = int32(len(h.heap))
		h.heap = append(h.heap, e)
		e.index = -1
	}
	q.ready.items = nil
	q.fifo = false
	for _, h := range q.hosts {
		if len(h.heap) > 0 {
			h.init()
			q.placeHostLocked(h)
		}
	}
}

// fifoLocked builds the push order from the hosts' heaps, and keeps both
// from then on.
func (q *MemoryQueue) fifoLocked() {
	if q.fifo {
		return
	}
	q.fifo = true
	items := make([]*memEntry, 0, q.nready)
	for _, h := range q.hosts {
		for _, e := range h.heap {
			e.index = int32(len(items))
			items = append(items, e)
		}
	}
	q.ready.items = items
	heap.Init(&q.ready)
}

// entryBefore orders a host's ready entries: higher priority first, then
// push order.
func entryBefore(a, b *memEntry) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}

// The host's heap is written out rather than through container/heap: it
// is on every LeaseHosts' path.

func (h *memHost) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	h.heap[i].hindex = int32(i)
	h.heap[j].hindex = int32(j)
}

func (h *memHost) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !entryBefore(h.heap[j], h.heap[i]) {
			return
		}
		h.swap(i, j)
		j = i
	}
}

// down sifts the entry at i0 down and reports whether it moved.
func (h *memHost) down(i0 int) bool {
	i, n := i0, len(h.heap)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && entryBefore(h.heap[r], h.heap[j]) {
			j = r
		}
		if !entryBefore(h.heap[j], h.heap[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

func (h *memHost) init() {
	for i := len(h.heap)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *memHost) push(e *memEntry) {
	e.hindex = int32(len(h.heap))
	h.heap = append(h.heap, e)
	h.up(len(h.heap) - 1)
}

func (h *memHost) remove(i int) *memEntry {
	e := h.heap[i]
	last := len(h.heap) - 1
	if i != last {
		h.swap(i, last)
	}
	h.heap[last] = nil
	h.heap = h.heap[:last]
	if i != last && !h.down(i) {
		h.up(i)
	}
	e.hindex = -1
	return e
}

// first returns up to k of the host's ready entries in lease order without
// changing the heap, in O(k log k): the next one is always a child of one
// already listed.
func (h *memHost) first(k int) []*memEntry {
	out := make([]*memEntry, 0, min(k, len(h.heap)))
	next := indexHeap{heap: h.heap, items: []int{0}}
	for len(out) < k && next.Len() > 0 {
		i := heap.Pop(&next).(int)
		out = append(out, h.heap[i])
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(h.heap) {
				heap.Push(&next, c)
			}
		}
	}
	return out
}

// indexHeap orders positions of a host's heap by their entries.
type indexHeap struct {
	heap  []*memEntry
	items []int
}

func (x *indexHeap) Len() int           { return len(x.items) }
func (x *indexHeap) Less(i, j int) bool { return entryBefore(x.heap[x.items[i]], x.heap[x.items[j]]) }
func (x *indexHeap) Swap(i, j int)      { x.items[i], x.items[j] = x.items[j], x.items[i] }
func (x *indexHeap) Push(v any)         { x.items = append(x.items, v.(int)) }

func (x *indexHeap) Pop() any {
	v := x.items[len(x.items)-1]
	x.items = x.items[:len(x.items)-1]
	return v
}

// hostHeap is a container/heap of hosts that keeps memHost.index current.
type hostHeap struct {
	items []*memHost
	less  func(a, b *memHost) bool
}

// byHead orders hosts with ready entries by their next entry.
func byHead(a, b *memHost) bool { return entryBefore(a.heap[0], b.heap[0]) }

func byReady(a, b *memHost) bool {
	if c := a.ready.Compare(b.ready); c != 0 {
		return c < 0
	}
	return cmp.Less(a.name, b.name)
}

func (h *hostHeap) Len() int           { return len(h.items) }
func (h *hostHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }

func (h *hostHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}

func (h *hostHeap) Push(x any) {
	m := x.(*memHost)
	m.index = len(h.items)
	h.items = append(h.items, m)
}

func (h *hostHeap) Pop() any {
	n := len(h.items) - 1
	m := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	m.index = -1
	return m
}
