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
	// push adds an admitted request, ready at notBefore (zero: now).
	push(ctx context.Context, req *Request, notBefore time.Time) error
	// next blocks until a request is ready, or ctx ends, or the frontier is done.
	next(ctx context.Context) (*Request, error)
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
// here), and acknowledges each when it is finished. Retries wait in memory
// for their not-before time and are pushed back to the queue on close.
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
	delayed  delayHeap
	inflight int
	errs     []error
	closed   bool
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

func (f *queueFrontier) push(ctx context.Context, req *Request, notBefore time.Time) error {
	if !notBefore.IsZero() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.closed {
			return ErrStopped
		}
		req.notBefore = notBefore
		heap.Push(&f.delayed, req)
		f.inflight++
		f.signal()
		return nil
	}
	req.admitted = true
	data, err := req.Marshal()
	if err != nil {
		return err
	}
	return f.q.Push(ctx, data)
}

// takeDelayed returns a retry that is due, or when the next one is.
func (f *queueFrontier) takeDelayed() (*Request, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.delayed) == 0 {
		return nil, time.Time{}, f.inflight < f.ahead
	}
	if !f.delayed[0].notBefore.After(time.Now()) {
		return heap.Pop(&f.delayed).(*Request), time.Time{}, true
	}
	return nil, f.delayed[0].notBefore, f.inflight < f.ahead
}

func (f *queueFrontier) next(ctx context.Context) (*Request, error) {
	backoff := time.Millisecond
	for {
		req, due, room := f.takeDelayed()
		if req != nil {
			return req, nil
		}
		if room {
			req, err := f.lease(ctx)
			if err == nil {
				backoff = time.Millisecond
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
		// request, a retry coming due, or else a growing timer: other
		// consumers' leases can expire without any notification.
		wait := backoff
		if !due.IsZero() {
			wait = min(wait, time.Until(due))
		}
		t := time.NewTimer(wait)
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
		if aerr := f.q.Ack(ctx, e.ID); aerr != nil {
			f.c.logger.Warn("acknowledging queue entry", "err", aerr)
		}
		return nil, errRefused
	}
	if !req.admitted {
		if req.Depth == 0 {
			req.Depth = 1
		}
		req.checkRevisit = true
		if err := f.c.admit(ctx, f.cfg, req); err != nil {
			req.err = err
			f.c.refuse(req, err)
			if aerr := f.q.Ack(ctx, e.ID); aerr != nil {
				f.c.logger.Warn("acknowledging queue entry", "err", aerr)
			}
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

// drained reports whether the crawl is over: nothing of ours in flight and
// nothing left in the queue (nor leased by another consumer).
func (f *queueFrontier) drained(ctx context.Context) (bool, error) {
	f.mu.Lock()
	busy := f.inflight > 0 || len(f.delayed) > 0
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

// close releases every entry leased and not finished, and pushes waiting
// retries back to the queue, so that nothing is lost when a run stops.
func (f *queueFrontier) close() {
	f.mu.Lock()
	f.closed = true
	leased := f.leased
	f.leased = map[string]*Request{}
	delayed := f.delayed
	f.delayed = nil
	f.mu.Unlock()
	ctx := context.Background()
	for id := range leased {
		if err := f.q.Release(ctx, id, time.Time{}); err != nil {
			f.c.logger.Warn("releasing queue entry", "err", err)
		}
	}
	for _, req := range delayed {
		req.admitted = true
		data, err := req.Marshal()
		if err == nil {
			err = f.q.Push(ctx, data)
		}
		if err != nil {
			f.c.logger.Warn("requeueing a retry", "url", urlString(req), "err", err)
		}
	}
}

func (f *queueFrontier) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}
