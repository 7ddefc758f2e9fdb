package magpie

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/magpiecrawl/magpie/internal/runlink"
	"github.com/magpiecrawl/magpie/internal/urlkey"
)

// addBuffer holds the requests that queue.AddURL and queue.AddRequest gave
// a queue run while it runs (see runlink). They are stored like the links
// of the pages: checked against the visited set and pushed in one round
// trip with the next batch of finished pages' links (storeBatchLinks), so
// an entry added by a page's callbacks is stored before that page is
// acknowledged, and a kill -9 loses nothing.
type addBuffer struct {
	// links and refused are guarded by the frontier's mu. refused are requests
	// refused when added: duplicates of a request pushed by this run and
	// not leased yet, and URLs the collector's filters refuse; they reach
	// OnRefused when the buffer is flushed, never inside the AddURL call
	// (which a callback holding the sync turn makes).
	links   linkBatch
	refused []*Request
	// added counts the requests ever buffered (under the frontier's mu),
	// so that a caller can tell whether user code it ran added any.
	added int
	// flushMu is held while buffered requests are taken and stored, so
	// that an acknowledgement batch cut after a request was added waits
	// for a flush that took it (a flush by the feeder, see next).
	flushMu sync.Mutex
	// detach ends the hand-over from the Queue; set once by attachAdds
	// and called by close.
	detach func()
}

// attachAdds makes the Queue whose run this is (if ctx says so, see
// runlink) hand its AddURL and AddRequest calls to addQueued until close.
func (f *queueFrontier) attachAdds(ctx context.Context) {
	if s := runlink.From[*Request](ctx); s != nil {
		f.added.detach = s.Attach(f.addQueued)
	}
}

// detachAdds ends the hand-over; later AddURL calls push at once.
func (f *queueFrontier) detachAdds() {
	if f.added.detach != nil {
		f.added.detach()
	}
}

// addQueued buffers r, a request given to queue.AddRequest during the run.
// It is queued without admission, as AddRequest queues it outside a run:
// admission runs when it is leased. What its lease would refuse for its URL
// alone (scheme, depth, URL and domain filters, see config.checkURL) is
// refused now instead of being stored, and so is a duplicate of a request
// this run pushed and has not leased yet (refused as visited); both are
// reported at the next flush, never inside the AddURL call.
func (f *queueFrontier) addQueued(r *Request) error {
	method := cmp.Or(r.Method, http.MethodGet)
	key := urlkey.RequestKey(method, urlkey.Canonical(r.URL, f.cfg.sortQuery), r.bodyBytes)
	var refusal error
	if !r.entry.admitted {
		refusal = f.cfg.checkURL(r.URL, max(r.Depth, 1))
	}
	// The duplicate check comes before Marshal: most links a page adds
	// are duplicates, and they need no entry. A duplicate that nothing
	// would see refused (no OnRefused, no debug log, no recrawl) needs no
	// Request either: it is only counted, at once (a count runs no user
	// code, so it may happen inside the AddURL call).
	dedupe := refusal == nil && !r.entry.admitted && !f.cfg.allowRevisit
	var n *Request
	if refusal != nil || dedupe {
		heard := refusal != nil || f.cfg.recrawl != nil || f.c.debugEnabled() || len(f.c.snapshotCallbacks().refused) > 0
		if heard {
			n = f.queuedRequest(r, method, key)
		}
		f.mu.Lock()
		if refusal == nil {
			if _, dup := f.pushed[key]; !dup {
				f.pushed[key] = struct{}{}
			} else if n == nil {
				f.mu.Unlock()
				f.c.nextID.Add(1) // the ID its Request would have taken
				f.c.refusals.add(RefusedVisited)
				return nil
			} else {
				refusal = &AlreadyVisitedError{Destination: n.URL}
			}
		}
		if refusal != nil {
			n.err = refusal
			f.added.refused = append(f.added.refused, n)
			f.unlockAdded()
			return nil
		}
		f.mu.Unlock()
	}
	if n == nil {
		n = f.queuedRequest(r, method, key)
	}
	if !r.entry.admitted {
		// Ranked as a link of the run is (Prioritize, the crawl order),
		// so that it is stored under its priority.
		if err := f.c.decidePriority(f.cfg, n); err != nil {
			f.mu.Lock()
			if dedupe {
				delete(f.pushed, key)
			}
			n.err = err
			f.added.refused = append(f.added.refused, n)
			f.unlockAdded()
			return nil
		}
	}
	// r is the caller's: it is marshalled with the priority decided for
	// it, and given back as it came.
	own := r.Priority
	r.Priority = n.Priority
	data, err := r.Marshal()
	r.Priority = own
	if err != nil {
		if dedupe {
			f.mu.Lock()
			delete(f.pushed, key)
			f.mu.Unlock()
		}
		return fmt.Errorf("marshal request: %w", err)
	}
	f.mu.Lock()
	f.added.links.data = append(f.added.links.data, data)
	f.added.links.reqs = append(f.added.links.reqs, n)
	f.added.added++
	f.unlockAdded()
	return nil
}

// unlockAdded releases f.mu after addQueued buffered a request. With
// nothing in flight no acknowledgement will flush the buffer: it wakes the
// feeder, which flushes it when it finds nothing to lease.
func (f *queueFrontier) unlockAdded() {
	idle := f.inflight == 0 && len(f.acks) == 0 && f.acking == 0
	f.mu.Unlock()
	if idle {
		f.signal()
	}
}

// queuedRequest is the request that stands for r in the buffer: what
// storeLinks needs (visited key, whether it is checked) and what OnRefused
// shows if it is refused, as its lease would have decoded it. r itself
// stays the caller's.
// method and key are r's method and visited key, as addQueued computed them.
func (f *queueFrontier) queuedRequest(r *Request, method string, key uint64) *Request {
	h, ctx := r.Headers, r.Ctx
	if h == nil {
		h = &http.Header{}
	}
	if ctx == nil {
		ctx = NewContext()
	}
	n := &Request{
		URL: r.URL, Method: method, Depth: max(r.Depth, 1), Headers: h, Host: r.Host, Ctx: ctx,
		ID: f.c.nextID.Add(1), collector: f.c, stdCtx: f.c.Context,
		bodyBytes: r.bodyBytes, Priority: r.Priority,
	}
	n.attempt = 1
	// An entry queued already admitted (a request of the crawl added
	// again) is leased without a visited check, so it is pushed
	// without one too.
	n.checkRevisit = !r.entry.admitted
	n.visitKey = key
	return n
}

// takeAddsLocked empties the buffer; f.mu is held.
func (f *queueFrontier) takeAddsLocked() (*linkBatch, []*Request) {
	var b *linkBatch
	if len(f.added.links.data) > 0 {
		b = &linkBatch{data: f.added.links.data, reqs: f.added.links.reqs}
		f.added.links = linkBatch{}
	}
	dups := f.added.refused
	f.added.refused = nil
	return b, dups
}

// addsPendingLocked reports whether the buffer holds anything; f.mu is held.
func (f *queueFrontier) addsPendingLocked() bool {
	return len(f.added.links.data) > 0 || len(f.added.refused) > 0
}

// addsCount returns how many requests were ever buffered.
func (f *queueFrontier) addsCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.added.added
}

// restoreAdds puts back a batch the storage did not take, ahead of what was
// added since, and marks its keys pushed again.
func (f *queueFrontier) restoreAdds(b *linkBatch) {
	if b == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range b.reqs {
		if r.checkRevisit && !f.cfg.allowRevisit {
			f.pushed[r.visitKey] = struct{}{}
		}
	}
	f.added.links.data = slices.Concat(b.data, f.added.links.data)
	f.added.links.reqs = slices.Concat(b.reqs, f.added.links.reqs)
}

// flushAdds stores the buffered requests now, without waiting for a page
// to finish: when the feeder finds nothing to lease (they may be all the
// work left), before an entry is acknowledged outside the batches, and
// when the run stops. It reports whether there was anything to flush; on
// an error the requests stay buffered.
func (f *queueFrontier) flushAdds(ctx context.Context) (bool, error) {
	f.added.flushMu.Lock()
	f.mu.Lock()
	b, dups := f.takeAddsLocked()
	f.mu.Unlock()
	if b == nil && len(dups) == 0 {
		f.added.flushMu.Unlock()
		return false, nil
	}
	var refused []*Request
	var err error
	if b != nil {
		refused, err = f.storeLinks(ctx, b)
		if err != nil {
			f.restoreAdds(b)
		}
	}
	f.added.flushMu.Unlock()
	f.reportVisited(slices.Concat(dups, refused))
	return true, err
}

// flushAddsAtClose stores what is buffered when the run stops; what the
// storage does not take within the grace is lost, and the run's error says so.
func (f *queueFrontier) flushAddsAtClose(ctx context.Context) {
	if _, err := f.flushAdds(ctx); err != nil {
		f.mu.Lock()
		n := len(f.added.links.data)
		f.added.links = linkBatch{}
		f.errs = append(f.errs, fmt.Errorf("%w: %d requests added with AddURL or AddRequest during the run were not stored: %w",
			ErrStorageUnavailable, n, err))
		f.mu.Unlock()
		f.c.logger.Warn("storing requests added during the run", "requests", n, "err", err)
	}
}
