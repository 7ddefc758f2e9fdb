package magpie

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
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

// memFrontier is the default frontier: an in-memory FIFO of pending
// requests (no marshalling, so Context values keep their types; a link waits
// in a compact form, see frontier_pending.go) plus a heap of requests that
// wait for a not-before time (retries).
type memFrontier struct {
	// mu guards every field below.
	mu    sync.Mutex
	ready []pendingReq
	head  int
	// origins are the latest shared parts of compact links (see originFor).
	origins [originCache]*pendingOrigin
	delayed delayHeap
	count   int // admitted and not finished
	idleCh  chan struct{}
	// wake has room for one value: a push signals a waiting next without blocking.
	wake   chan struct{}
	closed bool
	now    func() time.Time
	// max bounds count (MaxPending); 0: no bound.
	max int
}

// newMemFrontier returns an empty in-memory frontier holding at most max
// requests admitted and not finished (0: no bound).
func newMemFrontier(max int) *memFrontier {
	idle := make(chan struct{})
	close(idle)
	return &memFrontier{idleCh: idle, wake: make(chan struct{}, 1), now: time.Now, max: max}
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
		f.ready = append(f.ready, f.compact(req))
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
		f.ready = append(f.ready, pendingReq{full: heap.Pop(&f.delayed).(*Request)})
	}
	if f.head < len(f.ready) {
		p := f.ready[f.head]
		f.ready[f.head] = pendingReq{}
		f.head++
		if f.head == len(f.ready) {
			f.ready, f.head = f.ready[:0], 0
		} else if f.head > 1024 && f.head*2 > len(f.ready) {
			f.ready = append([]pendingReq(nil), f.ready[f.head:]...)
			f.head = 0
		}
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
	left := make([]*Request, 0, len(f.ready)-f.head+len(f.delayed))
	for i := f.head; i < len(f.ready); i++ {
		left = append(left, f.ready[i].request())
	}
	left = append(left, f.delayed...)
	f.ready, f.head, f.delayed, f.origins = nil, 0, nil, [originCache]*pendingOrigin{}
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
