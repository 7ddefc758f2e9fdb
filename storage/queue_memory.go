package storage

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrInvalidArgument is returned when a queue method is given an argument it
// cannot honour: a Lease of n <= 0 entries or with a ttl <= 0, or a negative
// maximum size.
var ErrInvalidArgument = errors.New("storage: invalid argument")

// MemoryQueue is the in-memory Queue: the default frontier, lost when the
// process ends. It implements Queue, HostQueue, QueueNotifier, LeaseRenewer
// and BatchReleaser.
//
// Lease hands out ready entries in push order; a released entry keeps its
// place (it goes back before entries pushed after it). LeaseHosts hands
// them out by host and priority (see HostQueue). Delayed entries and leases
// are kept in min-heaps by time, so every operation is O(log n) in the number
// of entries (Push and Ack per entry, Lease per entry handed out), plus
// O(log hosts) per host LeaseHosts takes from. Ready entries are kept in
// push order until the first LeaseHosts, which sorts them by host instead,
// O(n) once; a Lease after that builds the push order again, O(n) once,
// and both are kept from then on.
//
// Expired leases and due delayed entries are promoted lazily on Lease,
// LeaseHosts, Head and Len (with time.Now, so testing/synctest can drive
// them) and also by a timer, so that Notify fires when one becomes ready
// and a waiting consumer need not poll. A MemoryQueue used inside a
// synctest bubble must be used only inside that bubble.
//
// Create one with NewMemoryQueue; the zero value is not usable. Safe for
// concurrent use. Close it when done; after Close every method returns
// ErrClosed.
type MemoryQueue struct {
	// mu guards every field below.
	mu       sync.Mutex
	maxSize  int
	seq      uint64
	ready    entryHeap            // by seq, while fifo
	delayed  entryHeap            // by at, then seq
	leased   entryHeap            // by at (lease deadline), then seq
	leases   map[string]*memEntry // lease ID → leased entry
	closed   bool
	timer    *time.Timer
	timerAt  time.Time // deadline timer is armed for; zero when none
	notifyCh chan struct{}

	// Ready entries are kept in push order (ready) for Lease, in their
	// hosts' heaps (memHost.heap) for LeaseHosts, or in both. Keeping both
	// would double the cost of a queue consumed by one of the two, so each
	// order is built when first asked for and kept from then on; a queue
	// used only through LeaseHosts drops the push order.
	fifo, hosted bool
	nready       int // ready entries, whichever orders hold them
	hostState        // hosts, their counts, and their heaps while hosted
}

// memEntry is one entry of a MemoryQueue. It lives in one of the three
// heaps ready, delayed and leased (index is its position there) or, while
// ready and the queue is not fifo, in none; while ready and the queue is
// hosted, also in its host's heap (at hindex).
type memEntry struct {
	seq        uint64
	data       []byte
	at         time.Time // not-before while delayed, lease deadline while leased
	leaseID    string    // set while leased
	host       *memHost
	deliveries int32
	priority   int32
	// int32 positions keep an entry in 96 bytes, the size class it had
	// before it knew its host.
	index  int32
	hindex int32
}

// NewMemoryQueue returns an empty MemoryQueue holding at most maxSize
// unacknowledged entries (ready, delayed and leased together); 0 means no
// limit. A negative maxSize is treated as 0.
func NewMemoryQueue(maxSize int) *MemoryQueue {
	return &MemoryQueue{
		maxSize:  max(maxSize, 0),
		ready:    entryHeap{less: bySeq},
		delayed:  entryHeap{less: byTime},
		leased:   entryHeap{less: byTime},
		leases:   make(map[string]*memEntry),
		notifyCh: make(chan struct{}, 1),

		fifo:      true,
		hostState: newHostState(),
	}
}

// Push implements Queue. It returns ErrQueueFull, pushing nothing, when the
// entries would not all fit. The data slices are copied.
func (q *MemoryQueue) Push(ctx context.Context, data ...[]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.maxSize > 0 && q.totalLocked()+len(data) > q.maxSize {
		return ErrQueueFull
	}
	h := q.hostLocked("")
	q.addLocked(h, len(data))
	for _, d := range data {
		q.seq++
		q.readyPushLocked(&memEntry{seq: q.seq, data: append([]byte(nil), d...), host: h, hindex: -1})
	}
	q.notifyLocked()
	return nil
}

// Lease implements Queue. The returned Data are copies the caller may keep.
func (q *MemoryQueue) Lease(ctx context.Context, n int, ttl time.Duration) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n <= 0 || ttl <= 0 {
		return nil, fmt.Errorf("%w: Lease(n=%d, ttl=%v)", ErrInvalidArgument, n, ttl)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	now := time.Now()
	q.promoteLocked(now)
	if q.nready == 0 {
		return nil, ErrQueueEmpty
	}
	q.fifoLocked()
	out := make([]Entry, 0, min(n, q.nready))
	deadline := now.Add(ttl)
	for len(out) < n && q.ready.Len() > 0 {
		e := heap.Pop(&q.ready).(*memEntry)
		q.nready--
		if q.hosted {
			e.host.remove(int(e.hindex))
		}
		out = append(out, q.leaseLocked(e, deadline))
		if q.hosted {
			q.placeHostLocked(e.host)
		}
	}
	q.armLocked()
	return out, nil
}

// leaseLocked leases e, just taken from the ready orders, until deadline.
func (q *MemoryQueue) leaseLocked(e *memEntry, deadline time.Time) Entry {
	e.deliveries++
	e.at = deadline
	// The delivery count in the ID makes every lease distinct, so a
	// consumer whose lease expired and was taken over cannot ack or
	// release the new holder's lease.
	e.leaseID = leaseID(e.seq, int(e.deliveries))
	q.leases[e.leaseID] = e
	heap.Push(&q.leased, e)
	e.host.leased++
	return Entry{
		ID:         e.leaseID,
		Data:       append([]byte(nil), e.data...),
		Deliveries: int(e.deliveries),
		Host:       e.host.name,
		Priority:   int(e.priority),
		HostReady:  e.host.ready,
	}
}

// leaseID is "seq.deliveries", made in one allocation.
func leaseID(seq uint64, deliveries int) string {
	var buf [48]byte
	b := strconv.AppendUint(buf[:0], seq, 10)
	b = append(b, '.')
	return string(strconv.AppendInt(b, int64(deliveries), 10))
}

// Ack implements Queue. It returns ErrUnknownLease, after acknowledging
// every known ID, when some ID is not currently leased.
func (q *MemoryQueue) Ack(ctx context.Context, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	var unknown []string
	for _, id := range ids {
		e, ok := q.leases[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		delete(q.leases, id)
		heap.Remove(&q.leased, int(e.index))
		e.host.count--
		q.unleaseLocked(e.host)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %s", ErrUnknownLease, strings.Join(unknown, ", "))
	}
	return nil
}

// Release implements Queue. An entry released with a notBefore in the past
// or the zero time is ready at once, in its original push position.
func (q *MemoryQueue) Release(ctx context.Context, id string, notBefore time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if !q.releaseLocked(id, notBefore) {
		return fmt.Errorf("%w: %s", ErrUnknownLease, id)
	}
	q.notifyLocked()
	return nil
}

// releaseLocked moves a held lease back to ready or delayed and reports
// whether id was held.
func (q *MemoryQueue) releaseLocked(id string, notBefore time.Time) bool {
	e, ok := q.leases[id]
	if !ok {
		return false
	}
	delete(q.leases, id)
	heap.Remove(&q.leased, int(e.index))
	e.leaseID = ""
	if !notBefore.IsZero() && notBefore.After(time.Now()) {
		e.at = notBefore
		heap.Push(&q.delayed, e)
		q.armLocked()
	} else {
		e.at = time.Time{}
		q.readyPushLocked(e)
	}
	q.unleaseLocked(e.host)
	return true
}

// Renew implements LeaseRenewer: each held lease runs ttl from now. A lease
// whose deadline passed but that no Lease or Len has taken back yet is
// still held and is renewed.
func (q *MemoryQueue) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: Renew(ttl=%v)", ErrInvalidArgument, ttl)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	deadline := time.Now().Add(ttl)
	var unknown []string
	for _, id := range ids {
		e, ok := q.leases[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		e.at = deadline
		heap.Fix(&q.leased, int(e.index))
	}
	q.armLocked()
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %s", ErrUnknownLease, strings.Join(unknown, ", "))
	}
	return nil
}

// ReleaseBatch implements BatchReleaser under one lock.
func (q *MemoryQueue) ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	var unknown []string
	for _, id := range ids {
		if !q.releaseLocked(id, notBefore) {
			unknown = append(unknown, id)
		}
	}
	q.notifyLocked()
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %s", ErrUnknownLease, strings.Join(unknown, ", "))
	}
	return nil
}

// Len implements Queue. Expired leases count as ready, due delayed entries too.
func (q *MemoryQueue) Len(ctx context.Context) (QueueLen, error) {
	if err := ctx.Err(); err != nil {
		return QueueLen{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return QueueLen{}, ErrClosed
	}
	q.promoteLocked(time.Now())
	return QueueLen{Ready: q.nready, Delayed: q.delayed.Len(), Leased: q.leased.Len()}, nil
}

// Notify implements QueueNotifier. The channel receives a value after a Push,
// a Release, and when a lease expires or a delayed entry becomes due. It is
// never closed, not even by Close.
func (q *MemoryQueue) Notify() <-chan struct{} { return q.notifyCh }

// Close drops every entry; later calls return ErrClosed. Closing twice
// returns ErrClosed.
func (q *MemoryQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	q.closed = true
	q.ready.items, q.delayed.items, q.leased.items = nil, nil, nil
	q.nready = 0
	q.leases = nil
	q.hostState = hostState{}
	// The timer is not stopped: stopping a synctest timer from outside its
	// bubble is fatal, and its callback does nothing once closed.
	q.timer, q.timerAt = nil, time.Time{}
	return nil
}

func (q *MemoryQueue) totalLocked() int {
	return q.nready + q.delayed.Len() + q.leased.Len()
}

// readyPushLocked makes e ready, in each order the queue keeps.
func (q *MemoryQueue) readyPushLocked(e *memEntry) {
	q.nready++
	if q.fifo {
		heap.Push(&q.ready, e)
	}
	if q.hosted {
		q.hostPushLocked(e)
	}
}

// promoteLocked moves expired leases and due delayed entries to ready and
// reports whether it moved any; it also forgets the hosts that have no
// entries and whose ready time has passed.
func (q *MemoryQueue) promoteLocked(now time.Time) bool {
	moved := false
	for q.leased.Len() > 0 && !q.leased.items[0].at.After(now) {
		e := heap.Pop(&q.leased).(*memEntry)
		delete(q.leases, e.leaseID)
		e.leaseID, e.at = "", time.Time{}
		q.readyPushLocked(e)
		q.unleaseLocked(e.host)
		moved = true
	}
	for q.delayed.Len() > 0 && !q.delayed.items[0].at.After(now) {
		e := heap.Pop(&q.delayed).(*memEntry)
		e.at = time.Time{}
		q.readyPushLocked(e)
		moved = true
	}
	q.forgetIdleLocked(now)
	if moved {
		q.notifyLocked()
	}
	return moved
}

// armLocked makes sure a timer fires at the earliest lease deadline or
// not-before time, so that Notify fires without anyone calling Lease or Len.
func (q *MemoryQueue) armLocked() {
	var next time.Time
	if q.leased.Len() > 0 {
		next = q.leased.items[0].at
	}
	if q.delayed.Len() > 0 && (next.IsZero() || q.delayed.items[0].at.Before(next)) {
		next = q.delayed.items[0].at
	}
	if next.IsZero() {
		return
	}
	if !q.timerAt.IsZero() && !q.timerAt.After(next) {
		return // the armed timer fires first and re-arms
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.timerAt = next
	q.timer = time.AfterFunc(time.Until(next), q.fire)
}

// fire runs on the timer's goroutine.
func (q *MemoryQueue) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.timer, q.timerAt = nil, time.Time{}
	q.promoteLocked(time.Now())
	q.armLocked()
}

func (q *MemoryQueue) notifyLocked() {
	select {
	case q.notifyCh <- struct{}{}:
	default:
	}
}

// entryHeap is a container/heap of entries that keeps memEntry.index current
// so that Ack and Release can remove from the middle in O(log n).
type entryHeap struct {
	items []*memEntry
	less  func(a, b *memEntry) bool
}

func bySeq(a, b *memEntry) bool { return a.seq < b.seq }

func byTime(a, b *memEntry) bool {
	if a.at.Equal(b.at) {
		return a.seq < b.seq
	}
	return a.at.Before(b.at)
}

func (h *entryHeap) Len() int           { return len(h.items) }
func (h *entryHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }

func (h *entryHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = int32(i)
	h.items[j].index = int32(j)
}

func (h *entryHeap) Push(x any) {
	e := x.(*memEntry)
	e.index = int32(len(h.items))
	h.items = append(h.items, e)
}

func (h *entryHeap) Pop() any {
	n := len(h.items) - 1
	e := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	e.index = -1
	return e
}
