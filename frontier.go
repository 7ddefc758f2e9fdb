package magpie

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// errFrontierDone is returned by frontier.next when the crawl has nothing
// left and never will (a queue run found its queue empty and nothing in flight).
var errFrontierDone = errors.New("frontier done")

// frontier holds admitted requests until the engine takes them. push never
// waits for the crawl, so a callback that calls Visit cannot deadlock the
// engine that runs it.
type frontier interface {
	// push adds an admitted request, ready at notBefore (zero: now; the
	// queue frontier takes only zero, its delays are retry's).
	push(ctx context.Context, req *Request, notBefore time.Time) error
	// next blocks until a request is ready, or ctx ends, or the frontier is done.
	next(ctx context.Context) (*Request, error)
	// retry finishes this try of req, a request from next, and has it tried
	// again at notBefore. A durable frontier retries storage failures until
	// ctx (the run's) ends.
	retry(ctx context.Context, req *Request, notBefore time.Time) error
	// finish reports that a request from next (or from push, for requests
	// never handed out) is completely processed; ok false means it failed
	// because the run stopped, so a durable frontier should keep it. A
	// durable frontier retries storage failures until ctx (the run's) ends.
	finish(ctx context.Context, req *Request, ok bool)
	// idle is closed when nothing is pending; it is replaced by a fresh
	// channel when work arrives again.
	idle() <-chan struct{}
	// pending counts requests admitted and not finished.
	pending() int
	// close discards (memory) or releases (queue) what is left, and
	// returns the requests it discarded, for the run to settle.
	close() []*Request
}

// pacedFrontier is a frontier that keeps the hosts' share of the gate
// fair (memFrontier): the feeder sets the bounds before its first next, and
// the dispatcher reports each request that leaves the gate.
type pacedFrontier interface {
	pace(perHost, maxOut int)
	started(key string)
}

// memFrontier is the default frontier: in-memory queues of pending
// requests, one per host (no marshalling, so Context values keep their
// types; a link waits in a compact form, see frontier_pending.go), plus a
// heap of requests that wait for a not-before time (retries).
//
// Requests leave highest Priority first and, among equal priorities, in
// the order they came: within a host its own requests so, and across hosts
// the host whose next request goes first by that rule (with no priority
// set, pure arrival order, as before priorities existed). Except that a
// host with perHost requests out (taken by next and not yet started, so
// parked in the politeness gate) waits while maxOut requests are out in
// all: a host whose pages link mostly to itself then cannot fill the gate
// and hold a newly found host's first request behind its own backlog, while
// a crawl of one host still keeps maxOut of them parked. Pacing is off
// until the run calls pace; the run reports each start with started. A
// retry waiting for its not-before time comes back with its priority.
//
// What has left the frontier waits in the gate in the order it left, so
// in a crawl that ranks requests, or once a request with a priority other
// than 0 has come (ranked), a host with perHost requests out waits for
// their starts whatever the room: a request found later with a higher
// priority then waits behind at most perHost of its host's, not maxOut.
type memFrontier struct {
	// mu guards every field below.
	mu sync.Mutex
	// hosts holds a queue for every host with requests ready or out.
	hosts map[string]*hostQueue
	// under holds the hosts with requests ready and fewer than perHost
	// out; over those with perHost or more, served only while out <
	// maxOut. Both are ordered by their next request (pendingReq.first).
	under, over hostHeap
	seq         uint32
	// out counts requests taken and not yet started (pacing only).
	out int
	// perHost and maxOut are the pacing bounds (see pace); 0: no pacing.
	perHost, maxOut int
	// ranked is set once a request with a priority other than 0 came, or
	// from the start when the crawl ranks requests (config.ranked): over
	// hosts then wait for their starts.
	ranked bool
	// origins are the latest shared parts of compact links (see originFor).
	origins [originCache]*pendingOrigin
	delayed delayHeap
	count   int // admitted and not finished
	idleCh  chan struct{}
	// wake has room for one value: a push (or a start that lets a paced
	// host go on) signals a waiting next without blocking.
	wake   chan struct{}
	closed bool
	now    func() time.Time
	// max bounds count (MaxPending); 0: no bound.
	max int
}

// hostQueue is one host's ready requests, and how many of its requests are
// out. While its requests share one priority (in a crawl that sets none,
// always) items[head:] is a FIFO in arrival order, pushed and popped in
// O(1); a request of another priority turns it into a binary heap by
// pendingReq.first (heaped, head 0) until it is empty again.
type hostQueue struct {
	key   string
	items []pendingReq
	head  int
	out   int
	// idx is the queue's index in under or over (see inOver), -1 in none.
	idx    int
	inOver bool
	heaped bool
}

func (q *hostQueue) len() int { return len(q.items) - q.head }

// next is the request pop returns; the queue is not empty.
func (q *hostQueue) next() *pendingReq { return &q.items[q.head] }

// push adds p; it reports whether p is now the queue's next request, in
// front of one that was (which moves the queue in its host heap).
func (q *hostQueue) push(p pendingReq) (newNext bool) {
	if !q.heaped {
		if q.len() == 0 || q.items[q.head].prio == p.prio {
			// A queue whose front half is spent moves down instead of
			// growing, so that a host that is never empty stays bounded
			// by its backlog.
			if len(q.items) == cap(q.items) && q.head > 0 && q.head*2 >= len(q.items) {
				q.moveDown()
			}
			q.items = append(q.items, p)
			return false
		}
		// Items of one priority in arrival order are a heap already.
		q.moveDown()
		q.heaped = true
	}
	q.items = append(q.items, p)
	return q.up(len(q.items)-1) == 0
}

// moveDown moves items[head:] to the front.
func (q *hostQueue) moveDown() {
	n := copy(q.items, q.items[q.head:])
	clear(q.items[n:])
	q.items, q.head = q.items[:n], 0
}

func (q *hostQueue) pop() pendingReq {
	if q.heaped {
		n := len(q.items) - 1
		p := q.items[0]
		q.items[0] = q.items[n]
		q.items[n] = pendingReq{}
		q.items = q.items[:n]
		if n == 0 {
			q.heaped = false
		} else {
			q.down(0)
		}
		return p
	}
	p := q.items[q.head]
	q.items[q.head] = pendingReq{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return p
}

// up moves the heap's item i toward the root and returns where it ends.
func (q *hostQueue) up(i int) int {
	h := q.items
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].first(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	return i
}

// down moves the heap's item i toward the leaves.
func (q *hostQueue) down(i int) {
	h := q.items
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h[r].first(&h[l]) {
			c = r
		}
		if !h[c].first(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// before reports whether sequence number a came before b; they wrap, and
// only order hosts (each host's own order is its queue's).
func before(a, b uint32) bool { return int32(a-b) < 0 }

// hostHeap orders host queues by their next request (pendingReq.first).
type hostHeap []*hostQueue

func (h hostHeap) Len() int           { return len(h) }
func (h hostHeap) Less(i, j int) bool { return h[i].next().first(h[j].next()) }
func (h hostHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *hostHeap) Push(x any) {
	q := x.(*hostQueue)
	q.idx = len(*h)
	*h = append(*h, q)
}
func (h *hostHeap) Pop() any {
	old := *h
	n := len(old)
	q := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	q.idx = -1
	return q
}

// newMemFrontier returns an empty in-memory frontier holding at most max
// requests admitted and not finished (0: no bound).
func newMemFrontier(max int) *memFrontier {
	idle := make(chan struct{})
	close(idle)
	return &memFrontier{idleCh: idle, wake: make(chan struct{}, 1), now: time.Now, max: max,
		hosts: make(map[string]*hostQueue)}
}

// pace turns pacing on: a host with perHost requests out waits while
// maxOut requests are out in all, until started reports starts. The run
// calls it before it takes the first request, with the gate's bounds, so
// that the gate never holds more than its room.
func (f *memFrontier) pace(perHost, maxOut int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.perHost, f.maxOut = max(perHost, 1), max(maxOut, 1)
	// Hosts filed before pacing counted nothing out: all are under.
}

// started reports that a request of host key, taken by next, has left the
// gate to start (or will never start: the run is ending).
func (f *memFrontier) started(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.perHost == 0 {
		return
	}
	q := f.hosts[key]
	if q == nil || q.out == 0 {
		return
	}
	q.out--
	f.out--
	if q.idx >= 0 && q.inOver && q.out < f.perHost {
		heap.Remove(&f.over, q.idx)
		f.file(q)
		f.signal()
	} else if f.out == f.maxOut-1 && len(f.over) > 0 {
		f.signal()
	}
	f.forget(q)
}

// signal wakes a waiting next; f.mu is held.
func (f *memFrontier) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// file puts q, in no heap, into the heap its state says: none when it has
// nothing ready.
func (f *memFrontier) file(q *hostQueue) {
	if q.len() == 0 {
		q.inOver = false
		return
	}
	q.inOver = f.perHost > 0 && q.out >= f.perHost
	if q.inOver {
		heap.Push(&f.over, q)
	} else {
		heap.Push(&f.under, q)
	}
}

// forget drops q once it has nothing ready and nothing out, so that the
// map holds only hosts with work.
func (f *memFrontier) forget(q *hostQueue) {
	if q.len() == 0 && q.out == 0 && q.idx < 0 {
		delete(f.hosts, q.key)
	}
}

// enqueue adds p to its host's queue; f.mu is held.
func (f *memFrontier) enqueue(key string, p pendingReq) {
	q := f.hosts[key]
	if q == nil {
		q = &hostQueue{key: key, idx: -1}
		f.hosts[key] = q
	}
	f.seq++
	p.seq = f.seq
	if p.prio != 0 {
		f.ranked = true
	}
	newNext := q.push(p)
	switch {
	case q.len() == 1:
		f.file(q)
	case newNext && q.idx >= 0:
		// Its host now goes before where it stood.
		if q.inOver {
			heap.Fix(&f.over, q.idx)
		} else {
			heap.Fix(&f.under, q.idx)
		}
	}
}

// push adds req; past the MaxPending bound it refuses it with
// ErrFrontierFull.
func (f *memFrontier) push(_ context.Context, req *Request, notBefore time.Time) error {
	return f.add(req, notBefore, false)
}

// add adds req; force skips the bound, for a retry that takes the place of
// the request it copies.
func (f *memFrontier) add(req *Request, notBefore time.Time, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrStopped
	}
	if !force && f.max > 0 && f.count >= f.max {
		return fmt.Errorf("%w: %d requests pending (MaxPending)", ErrFrontierFull, f.count)
	}
	if f.count == 0 {
		f.idleCh = make(chan struct{})
	}
	f.count++
	if !notBefore.IsZero() && notBefore.After(f.now()) {
		req.notBefore = notBefore
		heap.Push(&f.delayed, req)
	} else {
		f.enqueue(req.URL.Host, f.compact(req))
	}
	f.signal()
	return nil
}

// take returns a ready request, or the time the next delayed one is due.
func (f *memFrontier) take() (*Request, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for len(f.delayed) > 0 && !f.delayed[0].notBefore.After(now) {
		req := heap.Pop(&f.delayed).(*Request)
		f.enqueue(req.URL.Host, pendingReq{full: req, prio: prio32(req.Priority)})
	}
	var q *hostQueue
	if len(f.under) > 0 {
		q = f.under[0]
	}
	if len(f.over) > 0 && !f.ranked && (f.perHost == 0 || f.out < f.maxOut) &&
		(q == nil || f.over[0].next().first(q.next())) {
		q = f.over[0]
	}
	if q != nil {
		if q.inOver {
			heap.Remove(&f.over, q.idx)
		} else {
			heap.Remove(&f.under, q.idx)
		}
		p := q.pop()
		if f.perHost > 0 {
			q.out++
			f.out++
		}
		f.file(q)
		f.forget(q)
		return p.request(), time.Time{}
	}
	if len(f.delayed) > 0 {
		return nil, f.delayed[0].notBefore
	}
	return nil, time.Time{}
}

func (f *memFrontier) next(ctx context.Context) (*Request, error) {
	for {
		r, due := f.take()
		if r != nil {
			return r, nil
		}
		var timer <-chan time.Time
		var t *time.Timer
		if !due.IsZero() {
			t = time.NewTimer(time.Until(due))
			timer = t.C
		}
		select {
		case <-f.wake:
		case <-timer:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// retry pushes a copy of req that takes over its visited marks, then
// finishes req.
func (f *memFrontier) retry(ctx context.Context, req *Request, notBefore time.Time) error {
	n, err := req.retryCopy()
	if err != nil {
		return err
	}
	n.marked, n.redirectKeys = req.marked, req.redirectKeys
	if err := f.add(n, notBefore, true); err != nil {
		return err
	}
	req.marked, req.redirectKeys = false, nil
	f.finish(ctx, req, true)
	return nil
}

func (f *memFrontier) finish(context.Context, *Request, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count--
	if f.count == 0 {
		close(f.idleCh)
	}
}

func (f *memFrontier) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idleCh
}

func (f *memFrontier) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

func (f *memFrontier) close() []*Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var ready []pendingReq
	for _, q := range f.hosts {
		ready = append(ready, q.items[q.head:]...)
	}
	// In the order they would have left, across hosts as within each.
	slices.SortFunc(ready, func(a, b pendingReq) int {
		if a.first(&b) {
			return -1
		}
		return 1
	})
	left := make([]*Request, 0, len(ready)+len(f.delayed))
	for i := range ready {
		left = append(left, ready[i].request())
	}
	left = append(left, f.delayed...)
	f.hosts, f.under, f.over, f.out = make(map[string]*hostQueue), nil, nil, 0
	f.delayed, f.origins = nil, [originCache]*pendingOrigin{}
	return left
}

// delayHeap orders delayed requests by not-before time.
type delayHeap []*Request

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].notBefore.Before(h[j].notBefore) }
func (h delayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)        { *h = append(*h, x.(*Request)) }
func (h *delayHeap) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return x
}
