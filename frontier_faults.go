package magpie

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// What a queue run does when its storage fails for good, when MaxRequests
// is reached, and when the storage is full. Outages that pass are outage.go's.

// errBudgetSpent means MaxRequests is reached: the run leases no more
// entries, and the queue keeps the rest for a later run.
var errBudgetSpent = errors.New("MaxRequests reached")

// fail ends the run for a storage error that retrying cannot fix (see
// fatalStorageError): the feeder stops, the requests in flight are
// cancelled, and RunQueue returns the error. The first one is kept.
func (f *queueFrontier) fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatalErr != nil {
		return
	}
	f.fatalErr = fmt.Errorf("queue storage %s: %w", op, err)
	if errors.Is(err, storage.ErrStoreReset) {
		// Say what was lost, as far as this run knows.
		f.fatalErr = fmt.Errorf("queue storage %s: the queue, the visited set and the %d entries this run held are lost: %w",
			op, f.inflight+len(f.acks)+f.acking, err)
	}
	f.errs = append(f.errs, f.fatalErr)
	close(f.fatal)
}

// failed reports whether fail was called.
func (f *queueFrontier) failed() bool {
	select {
	case <-f.fatal:
		return true
	default:
		return false
	}
}

// sleep waits for d and reports true, or reports false when ctx ends first;
// it returns early (true) when the run fails.
func (f *queueFrontier) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.fatal:
	case <-ctx.Done():
		return false
	}
	return true
}

// checkReset asks the store whether it lost its contents (a Redis server
// restarted without persistence) and fails the run if so. An error that
// leaves the question open (the store is down) is returned.
func (f *queueFrontier) checkReset(ctx context.Context) error {
	err := storage.CheckReset(ctx, f.q)
	if err != nil && fatalStorageError(err) {
		f.fail("reset check", err)
		return nil
	}
	return err
}

// checkResetAfterOutage runs when a storage outage ends: a store that comes
// back may have come back empty.
func (f *queueFrontier) checkResetAfterOutage() {
	ctx, cancel := context.WithTimeout(context.Background(), storageBackoffMax)
	defer cancel()
	if err := f.checkReset(ctx); err != nil {
		f.c.logger.Warn("checking whether the queue storage was reset", "err", err)
	}
}

// checkUnknownLease looks into a lease of this run that the store does not
// know (err from an ack, a release or a renewal): its lease expired and was
// taken over, or the store lost it with everything else.
func (f *queueFrontier) checkUnknownLease(ctx context.Context, err error) {
	if !errors.Is(err, storage.ErrUnknownLease) {
		return
	}
	if ctx.Err() != nil {
		// Stopping: the check still gets its own short deadline.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), storageBackoffMax)
		defer cancel()
		ctx = c
	}
	if cerr := f.checkReset(ctx); cerr != nil {
		f.c.logger.Warn("checking whether the queue storage was reset", "err", cerr)
	}
}

// budgetLeftLocked is how many more entries the run may lease under
// MaxRequests: the slots left less the entries leased and not admitted yet,
// each of which may take one. It is -1 without MaxRequests. f.mu is held.
func (f *queueFrontier) budgetLeftLocked() int {
	if f.cfg.maxRequests == 0 {
		return -1
	}
	left := int64(f.cfg.maxRequests) - int64(f.c.requestCount.Load()) - int64(len(f.buf))
	return int(max(left, 0))
}

// quiet reports whether nothing of this run is in flight or waiting for its
// acknowledgement. With MaxRequests reached, the run ends then.
func (f *queueFrontier) quiet() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	done := f.inflight == 0 && len(f.acks) == 0 && f.acking == 0
	if done && !f.budgetNoted {
		f.budgetNoted = true
		f.c.logger.Info("MaxRequests reached: the queue run ends, and the entries not leased stay in the queue",
			"max_requests", f.cfg.maxRequests)
	}
	return done
}

// storeEach stores, one at a time, the links of b not pushed yet, after a
// push of them all was refused because the queue was full (a store with a
// maximum size pushes all or nothing). Links that fit are pushed, links
// found visited are refused as visited, and the others are refused with
// ErrQueueFull: each is refused once (OnRefused), and the page that found
// them is acknowledged instead of being fetched again and again for links
// the queue will never take. pushed is updated; refused requests get their
// error in err.
func (f *queueFrontier) storeEach(ctx context.Context, b *linkBatch, pushed []bool) (refused []*Request, _ error) {
	st := f.c.storage()
	for i, r := range b.reqs {
		if pushed[i] {
			continue
		}
		checked := r.checkRevisit && !f.cfg.allowRevisit
		var ok []bool
		err := f.out.persist(ctx, "push", r, func(ctx context.Context) error {
			var err error
			if checked {
				ok, err = f.pushUnvisited(ctx, st, []uint64{r.visitKey}, b.reqs[i:i+1], b.data[i:i+1])
				return err
			}
			ok = []bool{true}
			return f.pushReqs(ctx, b.reqs[i:i+1], b.data[i:i+1])
		})
		switch {
		case errors.Is(err, storage.ErrQueueFull):
			r.err = ErrQueueFull
			refused = append(refused, r)
		case err != nil:
			return nil, err
		case len(ok) == 1 && ok[0]:
			pushed[i] = true
		default:
			r.err = &AlreadyVisitedError{Destination: r.URL}
			refused = append(refused, r)
		}
	}
	return refused, nil
}
