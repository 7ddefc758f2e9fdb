package magpie

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/storage"
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
	// again at notBefore.
	retry(req *Request, notBefore time.Time) error
	// finish reports that a request from next (or from push, for requests
	// never handed out) is completely processed; ok false means it failed
	// because the run stopped, so a durable frontier should keep it.
	finish(req *Request, ok bool)
	// idle is closed when nothing is pending; it is replaced by a fresh
	// channel when work arrives again.
	idle() <-chan struct{}
	// pending counts requests admitted and not finished.
	pending() int
	// close discards (memory) or releases (queue) what is left.
	close()
}

// memFrontier is the default frontier: an in-memory FIFO of *Request (no
// marshalling, so Context values keep their types) plus a heap of requests
// that wait for a not-before time (retries).
type memFrontier struct {
	// mu guards every field below.
	mu      sync.Mutex
	ready   []*Request
	head    int
	delayed delayHeap
	count   int // admitted and not finished
	idleCh  chan struct{}
	// wake has room for one value: a push signals a waiting next without blocking.
	wake   chan struct{}
	closed bool
	now    func() time.Time
}

func newMemFrontier() *memFrontier {
	idle := make(chan struct{})
	close(idle)
	return &memFrontier{idleCh: idle, wake: make(chan struct{}, 1), now: time.Now}
}

func (f *memFrontier) push(_ context.Context, req *Request, notBefore time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrStopped
	}
	if f.count == 0 {
		f.idleCh = make(chan struct{})
	}
	f.count++
	if !notBefore.IsZero() && notBefore.After(f.now()) {
		req.notBefore = notBefore
		heap.Push(&f.delayed, req)
	} else {
		f.ready = append(f.ready, req)
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return nil
}

// take returns a ready request, or the time the next delayed one is due.
func (f *memFrontier) take() (*Request, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for len(f.delayed) > 0 && !f.delayed[0].notBefore.After(now) {
		f.ready = append(f.ready, heap.Pop(&f.delayed).(*Request))
	}
	if f.head < len(f.ready) {
		r := f.ready[f.head]
		f.ready[f.head] = nil
		f.head++
		if f.head == len(f.ready) {
			f.ready, f.head = f.ready[:0], 0
		} else if f.head > 1024 && f.head*2 > len(f.ready) {
			f.ready = append([]*Request(nil), f.ready[f.head:]...)
			f.head = 0
		}
		return r, time.Time{}
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
func (f *memFrontier) retry(req *Request, notBefore time.Time) error {
	n, err := req.retryCopy()
	if err != nil {
		return err
	}
	n.marked, n.redirectKeys = req.marked, req.redirectKeys
	if err := f.push(context.Background(), n, notBefore); err != nil {
		return err
	}
	req.marked, req.redirectKeys = false, nil
	f.finish(req, true)
	return nil
}

func (f *memFrontier) finish(*Request, bool) {
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

func (f *memFrontier) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.ready, f.delayed = nil, nil
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

// queueLeaseTTL is how long a leased queue entry stays ours before another
// consumer may take it over. Entries are leased only shortly before they can
// start (at most 2 per worker ahead), so this is generous.
const queueLeaseTTL = 5 * time.Minute

// queueFrontier is RunQueue's frontier: a storage.Queue. Admitted requests
// are marshalled and pushed; the engine leases entries, unmarshals them
// (entries queued without admission, such as queue.AddURL's, are admitted
// on their first delivery), and acknowledges each when it is finished.
//
// Every state a request waits in lives in the storage, so a stopped or
// crashed consumer loses nothing: an entry in flight at Stop is released
// back, a retry is released with a not-before time, and an entry of a
// crashed consumer comes back when its lease expires. An entry queued
// without admission is admitted on each delivery, but a later delivery
// (Entry.Deliveries > 1) is the same request coming back: it keeps the
// MaxRequests slot and takes over the visited mark of its first delivery
// instead of being refused as already visited.
type queueFrontier struct {
	c      *Collector
	cfg    *config
	q      storage.Queue
	notify <-chan struct{}
	// ahead is the most entries leased and not yet finished.
	ahead int
	// wake has room for one value: finish signals a waiting next.
	wake chan struct{}

	// mu guards the fields below.
	mu       sync.Mutex
	leased   map[string]*Request
	inflight int
	errs     []error
}

func newQueueFrontier(c *Collector, cfg *config, q storage.Queue, workers int) *queueFrontier {
	f := &queueFrontier{c: c, cfg: cfg, q: q, ahead: 2 * workers, wake: make(chan struct{}, 1), leased: map[string]*Request{}}
	if n, ok := q.(storage.QueueNotifier); ok {
		f.notify = n.Notify()
	}
	return f
}

func (f *queueFrontier) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// push stores an admitted request. The push outlives the run's context: a
// callback that discovers a link while the run stops must still get it into
// the storage, because its parent is acknowledged and will not run again.
func (f *queueFrontier) push(ctx context.Context, req *Request, _ time.Time) error {
	// A deferred request is admitted for good when its entry is leased.
	req.admitted = !req.deferMark
	data, err := req.Marshal()
	if err != nil {
		return err
	}
	return f.q.Push(context.WithoutCancel(ctx), data)
}

// retry releases req's entry with a not-before time: the waiting retry holds
// no worker, survives a crash, and keeps its place among the entries. Its
// next delivery counts as the next attempt (see lease).
func (f *queueFrontier) retry(req *Request, notBefore time.Time) error {
	if req.leaseID == "" {
		return errors.New("retry of a request that has no queue lease")
	}
	if err := f.q.Release(context.Background(), req.leaseID, notBefore); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.leased, req.leaseID)
	f.inflight--
	f.mu.Unlock()
	f.signal()
	return nil
}

// room reports whether another entry may be leased.
func (f *queueFrontier) room() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight < f.ahead
}

func (f *queueFrontier) next(ctx context.Context) (*Request, error) {
	backoff := time.Millisecond
	for {
		if f.room() {
			req, err := f.lease(ctx)
			if err == nil {
				return req, nil
			}
			switch {
			case errors.Is(err, errRefused):
				continue
			case errors.Is(err, storage.ErrQueueEmpty):
				if done, err := f.drained(ctx); err != nil || done {
					if err != nil {
						return nil, err
					}
					return nil, errFrontierDone
				}
			case ctx.Err() != nil:
				return nil, ctx.Err()
			default:
				f.c.logger.Warn("leasing from queue", "err", err)
			}
		}
		// Nothing to take now. Wait for the queue's notification, a finished
		// request, or else a growing timer: other consumers' leases expire
		// and delayed entries come due without a word from a queue that has
		// no Notify.
		t := time.NewTimer(backoff)
		select {
		case <-f.notify:
		case <-f.wake:
		case <-t.C:
			backoff = min(2*backoff, 200*time.Millisecond)
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// errRefused means a leased entry was refused by admission (and acknowledged).
var errRefused = errors.New("refused")

// lease takes one entry and makes it a request.
func (f *queueFrontier) lease(ctx context.Context) (*Request, error) {
	es, err := f.q.Lease(ctx, 1, queueLeaseTTL)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	e := es[0]
	req, err := f.c.unmarshalRequest(e.Data)
	if err != nil {
		f.c.logger.Error("dropping undecodable queue entry", "err", err)
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
		f.ack(ctx, e.ID)
		return nil, errRefused
	}
	// Each delivery after the first is one more try of the same request:
	// a retry released with a not-before time, an entry released at Stop,
	// or one whose consumer died.
	req.attempt += max(e.Deliveries-1, 0)
	req.redelivered = e.Deliveries > 1
	if req.admitted {
		if req.marked {
			req.visitKey = requestKey(req.Method, canonicalURL(req.URL, f.cfg.sortQuery), req.bodyBytes)
		}
	} else {
		// A redelivered entry was admitted on its first delivery (unless a
		// stop cut that short): it holds a MaxRequests slot and, most
		// likely, the visited mark, which it takes over instead of being
		// refused as visited. The other checks run again; they are cheap.
		req.Depth = max(req.Depth, 1)
		req.checkRevisit = true
		req.ownsMark = req.redelivered
		if err := f.c.admit(ctx, f.cfg, req); err != nil {
			if ctx.Err() != nil {
				// The run stopped during admission (a robots.txt fetch, say):
				// the entry was not refused, so it goes back.
				f.release(e.ID, time.Time{})
				return nil, ctx.Err()
			}
			req.err = err
			f.c.refuse(req, err)
			f.ack(ctx, e.ID)
			return nil, errRefused
		}
	}
	req.leaseID = e.ID
	f.mu.Lock()
	f.leased[e.ID] = req
	f.inflight++
	f.mu.Unlock()
	return req, nil
}

func (f *queueFrontier) ack(ctx context.Context, id string) {
	if err := f.q.Ack(context.WithoutCancel(ctx), id); err != nil {
		f.c.logger.Warn("acknowledging queue entry", "err", err)
	}
}

func (f *queueFrontier) release(id string, notBefore time.Time) {
	if err := f.q.Release(context.Background(), id, notBefore); err != nil {
		f.c.logger.Warn("releasing queue entry", "err", err)
	}
}

// drained reports whether the crawl is over: nothing of ours in flight and
// nothing left in the queue (nor leased by another consumer, nor waiting
// for a retry's not-before time).
func (f *queueFrontier) drained(ctx context.Context) (bool, error) {
	f.mu.Lock()
	busy := f.inflight > 0
	f.mu.Unlock()
	if busy {
		return false, nil
	}
	l, err := f.q.Len(ctx)
	if err != nil {
		return false, err
	}
	return l.Total() == 0, nil
}

// finish acknowledges a finished entry, or releases it when the run stopped
// before it could finish. A released entry keeps its admission (its visited
// mark stays, see run.finish), which its next delivery takes over.
func (f *queueFrontier) finish(req *Request, ok bool) {
	f.mu.Lock()
	id := req.leaseID
	if id != "" {
		delete(f.leased, id)
	}
	f.inflight--
	f.mu.Unlock()
	if id != "" {
		var err error
		if ok {
			err = f.q.Ack(context.Background(), id)
		} else {
			err = f.q.Release(context.Background(), id, time.Time{})
		}
		if err != nil {
			f.c.logger.Warn("settling queue entry", "url", urlString(req), "err", err)
		}
	}
	f.signal()
}

// idle never fires: a queue run ends when the queue is drained.
func (f *queueFrontier) idle() <-chan struct{} { return nil }

func (f *queueFrontier) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
}

// close releases every entry leased and not finished, so that nothing is
// lost when a run stops. Each keeps its admission for its next delivery.
func (f *queueFrontier) close() {
	f.mu.Lock()
	leased := f.leased
	f.leased = map[string]*Request{}
	f.mu.Unlock()
	for id := range leased {
		f.release(id, time.Time{})
	}
}

func (f *queueFrontier) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}
