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
func (f *memFrontier) retry(ctx context.Context, req *Request, notBefore time.Time) error {
	n, err := req.retryCopy()
	if err != nil {
		return err
	}
	n.marked, n.redirectKeys = req.marked, req.redirectKeys
	if err := f.push(context.Background(), n, notBefore); err != nil {
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
//
// A storage that fails (Redis down or restarting) pauses the crawl instead
// of losing work: every operation is retried with backoff until it succeeds
// or the run stops (see outages). A link that still cannot be pushed when
// the run stops makes its parent's entry released rather than acknowledged,
// so that the parent's callbacks run again and find the link again.
type queueFrontier struct {
	c      *Collector
	cfg    *config
	q      storage.Queue
	notify <-chan struct{}
	out    *outages
	// ahead is the most entries leased and not yet finished.
	ahead int
	// wake has room for one value: finish signals a waiting next.
	wake chan struct{}
	// reclaim is set when a Lease failed: its reply may have been lost
	// after the storage granted entries. Only the feeder (next) uses it.
	reclaim bool

	// mu guards the fields below.
	mu     sync.Mutex
	leased map[string]*Request
	// pushed holds the visited keys of links this run pushed and has not
	// leased yet. Links are marked visited only when leased (see
	// Collector.admit), so without it every duplicate link found before
	// its first copy is leased would be pushed too, filling a bounded
	// queue with duplicates. Losing it in a crash is harmless: the first
	// copy is in the storage.
	pushed   map[uint64]struct{}
	inflight int
	errs     []error
}

func newQueueFrontier(c *Collector, cfg *config, q storage.Queue, workers int) *queueFrontier {
	f := &queueFrontier{c: c, cfg: cfg, q: q, out: newOutages(c), ahead: 2 * workers, wake: make(chan struct{}, 1), leased: map[string]*Request{}, pushed: map[uint64]struct{}{}}
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

// push stores an admitted request, retrying a failing storage until ctx
// (the run's) ends. The first try outlives ctx: a callback that discovers a
// link while the run stops must still get it into the storage. When the
// storage stays down, the request's parent (if any) is marked so that its
// entry is released instead of acknowledged, and the link is found again.
func (f *queueFrontier) push(ctx context.Context, req *Request, _ time.Time) error {
	// A deferred request is admitted for good when its entry is leased.
	req.admitted = !req.deferMark
	dedupe := req.deferMark && req.checkRevisit && !f.cfg.allowRevisit
	if dedupe {
		f.mu.Lock()
		_, dup := f.pushed[req.visitKey]
		if !dup {
			f.pushed[req.visitKey] = struct{}{}
		}
		f.mu.Unlock()
		if dup {
			return &AlreadyVisitedError{Destination: req.URL}
		}
	}
	data, err := req.Marshal()
	if err == nil {
		err = f.out.persist(ctx, "push", req, func(ctx context.Context) error { return f.q.Push(ctx, data) })
	}
	if err != nil && dedupe {
		f.mu.Lock()
		delete(f.pushed, req.visitKey)
		f.mu.Unlock()
	}
	if err != nil && req.parent != nil && errors.Is(err, ErrStorageUnavailable) {
		req.parent.lostChild.Store(true)
	}
	return err
}

// retry releases req's entry with a not-before time: the waiting retry holds
// no worker, survives a crash, and keeps its place among the entries. Its
// next delivery counts as the next attempt (see lease).
func (f *queueFrontier) retry(ctx context.Context, req *Request, notBefore time.Time) error {
	if req.leaseID == "" {
		return errors.New("retry of a request that has no queue lease")
	}
	if req.lostChild.Load() {
		// Its callbacks ran and lost a link: the whole page runs again.
		notBefore = time.Time{}
	}
	err := f.out.persist(ctx, "release", req, func(ctx context.Context) error { return f.q.Release(ctx, req.leaseID, notBefore) })
	if err != nil {
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
	idleWait := time.Millisecond
	failures := 0 // consecutive Lease or Len failures
	for {
		var backoff time.Duration
		if f.room() {
			req, err := f.lease(ctx)
			if err == nil {
				return req, nil
			}
			switch {
			case errors.Is(err, errRefused):
				continue
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.Is(err, storage.ErrQueueEmpty):
				done, err := f.drained(ctx)
				switch {
				case err == nil && done:
					return nil, errFrontierDone
				case err == nil:
					failures = 0
				case ctx.Err() != nil:
					return nil, ctx.Err()
				default:
					// An unknown length is not an empty queue: wait for the
					// storage rather than end the run.
					failures++
					f.out.failed("len", failures, err, nil)
					backoff = storageBackoff(failures)
				}
			default:
				failures++
				f.out.failed("lease", failures, err, nil)
				backoff = storageBackoff(failures)
			}
		}
		if backoff > 0 {
			// The storage is down: neither a notification nor a finished
			// request makes a retry any likelier to succeed.
			if !sleepCtx(ctx, backoff) {
				return nil, ctx.Err()
			}
			continue
		}
		// Nothing to take now. Wait for the queue's notification, a finished
		// request, or else a growing timer: other consumers' leases expire
		// and delayed entries come due without a word from a queue that has
		// no Notify.
		t := time.NewTimer(idleWait)
		select {
		case <-f.notify:
		case <-f.wake:
		case <-t.C:
			idleWait = min(2*idleWait, 200*time.Millisecond)
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// sleepCtx waits for d and reports true, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// errRefused means a leased entry was refused by admission (and acknowledged).
var errRefused = errors.New("refused")

// lease takes one entry and makes it a request. A Lease failure is returned
// as is (next backs off); a visited-set failure during admission keeps the
// entry leased and retries the admission until ctx ends.
func (f *queueFrontier) lease(ctx context.Context) (*Request, error) {
	started := time.Now()
	if err := f.reclaimLost(ctx); err != nil {
		return nil, err
	}
	es, err := f.q.Lease(ctx, 1, queueLeaseTTL)
	if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
		f.reclaim = true
		return nil, err
	}
	f.out.recovered("lease", started)
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
		f.settle(ctx, e.ID, nil, true)
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
		err := f.admitLeased(ctx, req)
		if err != nil && ctx.Err() != nil {
			// The run stopped during admission (a robots.txt fetch, or a
			// storage outage): the entry was not refused, so it goes back,
			// still counted as pushed.
			f.settle(ctx, e.ID, req, false)
			return nil, ctx.Err()
		}
		// Admitted (the visited mark now dedupes it) or refused: either
		// way it is no longer a pending push of this run.
		f.forgetPushed(req)
		if err != nil {
			req.err = err
			// Deferred: settled even if OnError ends the goroutine
			// (runtime.Goexit; the run starts another feeder).
			defer f.settle(ctx, e.ID, req, true)
			f.c.refuse(req, err)
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

// reclaimLost releases the entries a failed Lease may have been granted.
// It runs in the feeder before the next Lease, so no Lease of this
// consumer is in flight; the held leases are those the frontier knows.
func (f *queueFrontier) reclaimLost(ctx context.Context) error {
	r, ok := f.q.(storage.LeaseReclaimer)
	if !f.reclaim || !ok {
		f.reclaim = false
		return nil
	}
	f.mu.Lock()
	held := make([]string, 0, len(f.leased))
	for id := range f.leased {
		held = append(held, id)
	}
	f.mu.Unlock()
	if err := r.ReleaseUnheld(ctx, held); err != nil {
		return err
	}
	f.reclaim = false
	return nil
}

// admitLeased admits a leased request, retrying while the visited set
// fails: a storage outage must not refuse (and so lose) the entry.
func (f *queueFrontier) admitLeased(ctx context.Context, req *Request) error {
	for attempt := 1; ; attempt++ {
		started := time.Now()
		err := f.c.admit(ctx, f.cfg, req)
		var se *StorageError
		if !errors.As(err, &se) || ctx.Err() != nil {
			if err == nil && attempt > 1 {
				f.out.recovered("visited", started)
			}
			return err
		}
		f.out.failed(se.Op, attempt, se.Err, req)
		// The failed call may have written the mark before its reply was
		// lost: the next try takes the mark over rather than refuse the
		// entry as visited (at worst a duplicate fetch, never a loss).
		req.ownsMark = true
		if !sleepCtx(ctx, storageBackoff(attempt)) {
			return ctx.Err()
		}
	}
}

// settle acknowledges (ack) or releases an entry, retrying a failing
// storage until ctx ends. An entry that cannot be settled stays leased and
// comes back when its lease expires: a duplicate, never a loss.
func (f *queueFrontier) settle(ctx context.Context, id string, req *Request, ack bool) {
	op := "release"
	do := func(ctx context.Context) error { return f.q.Release(ctx, id, time.Time{}) }
	if ack {
		op = "ack"
		do = func(ctx context.Context) error { return f.q.Ack(ctx, id) }
	}
	if err := f.out.persist(ctx, op, req, do); err != nil {
		f.c.logger.Warn("settling queue entry", "op", op, "url", urlString(req), "err", err)
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
	started := time.Now()
	l, err := f.q.Len(ctx)
	if err != nil {
		return false, err
	}
	f.out.recovered("len", started)
	return l.Total() == 0, nil
}

// finish acknowledges a finished entry, or releases it when the run stopped
// before it could finish. A released entry keeps its admission (its visited
// mark stays, see run.finish), which its next delivery takes over. A
// request whose callbacks found a link the storage would not take is
// released too, so that its callbacks run again.
func (f *queueFrontier) finish(ctx context.Context, req *Request, ok bool) {
	f.mu.Lock()
	id := req.leaseID
	if id != "" {
		delete(f.leased, id)
	}
	f.inflight--
	f.mu.Unlock()
	if id != "" {
		if ok && req.lostChild.Load() {
			ok = false
			f.c.logger.Warn("releasing a page whose links could not be stored; it will be fetched again",
				"url", urlString(req), "request_id", req.ID)
		}
		f.settle(ctx, id, req, ok)
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
// A storage that fails gets queueStopGrace in all to take the releases;
// entries it does not take come back when their leases expire.
func (f *queueFrontier) close() {
	f.mu.Lock()
	leased := f.leased
	f.leased = map[string]*Request{}
	f.mu.Unlock()
	if len(leased) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueStopGrace)
	defer cancel()
	for id, req := range leased {
		f.settle(ctx, id, req, false)
	}
}

func (f *queueFrontier) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

// forgetPushed drops a leased request's key from the pushed set.
func (f *queueFrontier) forgetPushed(req *Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pushed) == 0 {
		return
	}
	delete(f.pushed, requestKey(req.Method, canonicalURL(req.URL, f.cfg.sortQuery), req.bodyBytes))
}
