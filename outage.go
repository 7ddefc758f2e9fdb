package magpie

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// Storage outages. The backoff doubles from storageBackoffMin up to
// storageBackoffMax, with jitter so that the consumers of one Redis do not
// all retry in step when it comes back.
const (
	storageBackoffMin = 50 * time.Millisecond
	storageBackoffMax = 5 * time.Second
)

// storageBackoff is the wait after the attempt-th consecutive failure: a
// random duration in the upper half of the doubled step.
func storageBackoff(attempt int) time.Duration {
	d := storageBackoffMax
	if attempt < 16 {
		d = min(storageBackoffMin<<max(attempt-1, 0), storageBackoffMax)
	}
	return d/2 + rand.N(d/2+1)
}

// transientStorageError reports whether a storage error may go away by
// itself (a connection refused or reset, a timeout, a server loading its
// data). Refusals that retrying cannot change are not.
func transientStorageError(err error) bool {
	return !fatalStorageError(err) && !errors.Is(err, storage.ErrQueueFull) && !errors.Is(err, storage.ErrUnknownLease) &&
		!errors.Is(err, storage.ErrClosed) && !errors.Is(err, storage.ErrQueueEmpty) &&
		!errors.Is(err, ErrUndecodableRequest)
}

// fatalStorageError reports whether a storage error ends a queue run: the
// store lost its contents (storage.ErrStoreReset) or cannot be used again
// (storage.ErrStoreUnusable). Waiting for it as for an outage would hang
// the run, and carrying on would report a wiped queue as a finished crawl.
func fatalStorageError(err error) bool {
	return errors.Is(err, storage.ErrStoreReset) || errors.Is(err, storage.ErrStoreUnusable)
}

// outageQuiet is how long an operation must go without failing before its
// next failure counts as a new outage. A storage coming back flaps (pooled
// connections work while new ones are still refused), and a continuous
// outage fails at least every storageBackoffMax: one outage, one report.
const outageQuiet = 2 * storageBackoffMax

// outages tracks the storage operations that are failing, so that an
// outage is reported once per kind of operation (OnError and a Warn), each
// retry at Warn with its attempt count, and the recovery at Info. It is
// safe for concurrent use.
type outages struct {
	c *Collector
	// down counts the kinds failing now, so that a success skips the lock.
	down atomic.Int32
	// mu guards ops.
	mu  sync.Mutex
	ops map[string]*outage
	// onFatal, when set, hears of every error persist meets that ends the
	// run (fatalStorageError); onRecover of every outage that ends. Both
	// are set before the run starts and never change.
	onFatal   func(op string, err error)
	onRecover func()
}

// outage is the latest outage of one kind of operation.
type outage struct {
	since time.Time
	// last is the time of the latest failure: only a success that started
	// after it ends the outage, not one that was in flight when it began.
	last     time.Time
	failures int
	// down is set from a failure to the next success that started after it.
	down bool
}

func newOutages(c *Collector) *outages {
	return &outages{c: c, ops: map[string]*outage{}}
}

// failed records the attempt-th consecutive failure of op (req may be nil).
func (o *outages) failed(op string, attempt int, err error, req *Request) {
	o.mu.Lock()
	now := time.Now()
	st := o.ops[op]
	fresh := st == nil || (!st.down && now.Sub(st.last) >= outageQuiet)
	if st == nil {
		st = &outage{}
		o.ops[op] = st
	}
	if fresh {
		st.since, st.failures = now, 0
	}
	if !st.down {
		st.down = true
		o.down.Add(1)
	}
	st.failures++
	st.last = now
	failures := st.failures
	o.mu.Unlock()
	o.c.logger.Warn("storage failing; retrying", "op", op, "attempt", attempt, "failures", failures, "url", logURL(req), "err", err)
	if !fresh {
		return
	}
	if req == nil {
		// OnError callbacks read r.Request.URL: give them an empty one
		// rather than a nil pointer for operations no request is part of.
		req = &Request{URL: &url.URL{}, Ctx: NewContext(), Headers: &http.Header{}, collector: o.c}
	}
	resp := &Response{Request: req, Ctx: req.Ctx}
	o.c.withCallbackMark(req, func(token uint64) { o.c.handleOnErrorAs(resp, token, &StorageError{Op: op, Err: err}) })
}

// recovered records a success of op that started at started, ending its
// outage if it had one.
func (o *outages) recovered(op string, started time.Time) {
	if o.down.Load() == 0 {
		return
	}
	o.mu.Lock()
	st := o.ops[op]
	ok := st != nil && st.down && started.After(st.last)
	var failures int
	var since time.Time
	if ok {
		st.down = false
		o.down.Add(-1)
		failures, since = st.failures, st.since
	}
	o.mu.Unlock()
	if ok {
		o.c.logger.Info("storage recovered", "op", op, "failures", failures, "duration", time.Since(since))
		if o.onRecover != nil {
			// A store that comes back may have come back empty.
			o.onRecover()
		}
	}
}

// persist runs do until it succeeds, fails with an error retrying cannot
// change (returned as is), or ctx ends after a failure (a *StorageError).
// do gets a context without ctx's cancellation: the first try is made even
// when the run is stopping, because what it stores would be lost otherwise.
func (o *outages) persist(ctx context.Context, op string, req *Request, do func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		started := time.Now()
		err := do(context.WithoutCancel(ctx))
		if err == nil {
			o.recovered(op, started)
			return nil
		}
		if !transientStorageError(err) {
			if o.onFatal != nil && fatalStorageError(err) {
				o.onFatal(op, err)
			}
			return err
		}
		if ctx.Err() != nil {
			return &StorageError{Op: op, Err: err}
		}
		o.failed(op, attempt, err, req)
		if !sleepCtx(ctx, storageBackoff(attempt)) {
			return &StorageError{Op: op, Err: err}
		}
	}
}
