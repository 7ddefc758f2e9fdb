package magpie

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// The end of a queue run's entries (see queueFrontier): the links a page's
// callbacks found, stored in one round trip when it finishes; its
// acknowledgement, batched with those of the pages finished meanwhile, or
// its release; the renewal of the leases held; and close, which settles
// what is left when the run stops.

// ackEntry is a finished entry waiting for its batched acknowledgement.
type ackEntry struct {
	id    string
	req   *Request
	links *linkBatch
	// soon is set when req's host may start again within hostLead
	// (noteReady): its acknowledgement ends the lease pace.
	soon bool
}

// linkBatch collects the links a leased request's callbacks find, so that
// they are checked against the visited set and pushed in one round trip
// when the request finishes (storage.PushUnvisited).
type linkBatch struct {
	data [][]byte
	reqs []*Request
}

// addToBatch adds a link to its parent's batch, if the parent is a leased
// request still being processed; the batch is stored when the parent
// finishes. It reports false for other requests (pushed at once).
func (f *queueFrontier) addToBatch(req *Request, data []byte) bool {
	p := req.entry.parent
	if p == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.entry.links == nil {
		return false
	}
	p.entry.links.data = append(p.entry.links.data, data)
	p.entry.links.reqs = append(p.entry.links.reqs, req)
	return true
}

// batching reports whether links found by req's callbacks are batched, so
// that admission may leave their visited check to the batch's push.
func (req *Request) batchingLinks() bool {
	return req.entry.parent != nil && req.entry.parent.entry.batchLinks.Load()
}

// flushLinks stores the links req's callbacks found (see storeLinks); a
// storage that stays down until ctx ends marks req so that its entry is
// released and its callbacks find the links again.
func (f *queueFrontier) flushLinks(ctx context.Context, req *Request) {
	if b := f.takeLinks(req); b != nil {
		refused, err := f.storeLinks(ctx, b)
		if err != nil {
			f.c.logger.Warn("storing the links of a page", "url", logURL(req), "links", len(b.data), "err", err)
			req.entry.lostChild.Store(true)
		}
		f.reportVisited(refused)
	}
}

// takeLinks ends the batching of req's links and returns them (nil when
// there are none).
func (f *queueFrontier) takeLinks(req *Request) *linkBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := req.entry.links
	req.entry.links = nil
	req.entry.batchLinks.Store(false)
	if b == nil || len(b.data) == 0 {
		return nil
	}
	return b
}

// storeLinks stores a batch of links (of one page or several) in one round
// trip: the visited set is checked and the unvisited links are pushed
// together (storage.PushUnvisited). A link found visited is refused
// (OnRefused) as Visit would have refused it. Links that skip the visited
// check (AllowURLRevisit, Retry copies) are pushed as they are.
func (f *queueFrontier) storeLinks(ctx context.Context, b *linkBatch) (refused []*Request, _ error) {
	var checked, plain []int
	for i, r := range b.reqs {
		if r.checkRevisit && !f.cfg.allowRevisit {
			checked = append(checked, i)
		} else {
			plain = append(plain, i)
		}
	}
	pushed := make([]bool, len(b.data))
	err := f.out.persist(ctx, "push", nil, func(ctx context.Context) error {
		if len(plain) > 0 {
			data := make([][]byte, len(plain))
			for j, i := range plain {
				data[j] = b.data[i]
			}
			reqs := make([]*Request, len(plain))
			for j, i := range plain {
				reqs[j] = b.reqs[i]
			}
			if err := f.pushReqs(ctx, reqs, data); err != nil {
				return err
			}
			for _, i := range plain {
				pushed[i] = true
			}
			plain = nil // pushed: a retry of the rest must not push them twice
		}
		if len(checked) == 0 {
			return nil
		}
		keys := make([]uint64, len(checked))
		data := make([][]byte, len(checked))
		reqs := make([]*Request, len(checked))
		for j, i := range checked {
			keys[j], data[j], reqs[j] = b.reqs[i].visitKey, b.data[i], b.reqs[i]
		}
		ok, err := f.pushUnvisited(ctx, f.c.storage(), keys, reqs, data)
		if err != nil {
			return err
		}
		for j, i := range checked {
			pushed[i] = ok[j]
		}
		return nil
	})
	switch {
	case errors.Is(err, storage.ErrQueueFull):
		// Not all of them fit: those that do are pushed one by one.
		refused, err = f.storeEach(ctx, b, pushed)
	case err == nil:
		for i, r := range b.reqs {
			if !pushed[i] {
				r.err = &AlreadyVisitedError{Destination: r.URL}
				refused = append(refused, r)
			}
		}
	}
	f.mu.Lock()
	for i, r := range b.reqs {
		if !pushed[i] && r.checkRevisit && !f.cfg.allowRevisit {
			delete(f.pushed, r.visitKey)
		}
	}
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return refused, nil
}

// reportVisited refuses links the storage did not take when they were
// stored, each with its error (set by storeLinks): found visited, as Visit
// would have refused them, or the queue full. It runs user callbacks
// (OnRefused), so it is called with no frontier state in the middle of a
// change.
func (f *queueFrontier) reportVisited(refused []*Request) {
	if len(refused) == 0 {
		return
	}
	report := func() {
		for _, r := range refused {
			f.c.refuseMarked(r, r.err)
		}
	}
	if f.cfg.async || len(f.c.snapshotCallbacks().refused) == 0 {
		// No OnRefused to run, or nothing in it can make Visit wait: the
		// sync-mode callback mark (a look at the stack) is not needed.
		report()
		return
	}
	// One mark for the batch: most links of a page are visited already.
	f.c.withCallbackMark(nil, func(token uint64) {
		for _, r := range refused {
			r.regionGID.Store(token)
		}
		report()
	})
}

// finish stores the links req's callbacks found, then acknowledges its
// entry (batched with other finished entries, see combineAcks), or releases it
// when the run stopped before it could finish. A released entry keeps its
// admission (its visited mark stays, see run.finish), which its next
// delivery takes over. A request whose callbacks found a link the storage
// would not take is released too, so that its callbacks run again.
func (f *queueFrontier) finish(ctx context.Context, req *Request, ok bool) {
	id := req.entry.leaseID
	if id == "" {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
		f.signal()
		return
	}
	links := f.takeLinks(req)
	soon := f.noteReady(req)
	f.mu.Lock()
	delete(f.leased, id)
	f.done(req)
	queued := ok && !f.closed && !req.entry.lostChild.Load()
	if queued {
		// Its links are stored, then it is acknowledged, together with
		// the other pages finished meanwhile (see combineAcks).
		f.acks = append(f.acks, ackEntry{id: id, req: req, links: links, soon: soon})
	}
	f.mu.Unlock()
	var refused []*Request
	if !queued && links != nil {
		var err error
		refused, err = f.storeLinks(ctx, links)
		if err != nil {
			f.c.logger.Warn("storing the links of a page", "url", logURL(req), "links", len(links.data), "err", err)
			req.entry.lostChild.Store(true)
		}
	}
	if !queued && ok && req.entry.lostChild.Load() {
		ok = false
		f.c.logger.Warn("releasing a page whose links could not be stored; it will be fetched again",
			"url", logURL(req), "request_id", req.ID)
	}
	if queued {
		f.combineAcks(ctx)
	} else {
		if ok {
			if _, err := f.flushAdds(ctx); err != nil {
				ok = false // its callbacks run again and add again
			}
		}
		f.settle(ctx, id, req, ok)
		f.freeSlots(soon)
		f.reportVisited(refused)
	}
	f.signal()
}

// combineAcks acknowledges the finished entries waiting, unless another
// goroutine is already doing so: that one takes them with its next batch.
// So a busy run makes one round trip for the pages that finished while
// the previous one was on its way, an idle one acknowledges at once, and
// no goroutine of its own is needed.
func (f *queueFrontier) combineAcks(ctx context.Context) {
	for {
		f.mu.Lock()
		if f.flushing || len(f.acks) == 0 {
			f.mu.Unlock()
			return
		}
		f.flushing = true
		f.mu.Unlock()
		refused := f.flushAcks(ctx)
		f.mu.Lock()
		f.flushing = false
		f.mu.Unlock()
		f.reportVisited(refused)
		// Entries added after flushAcks found none left, while flushing
		// was still set, are taken by the next turn of the loop.
	}
}

// maxAckBatch is the most entries one Ack call acknowledges.
const maxAckBatch = 512

// flushAcks sends the acknowledgements waiting, retrying a failing storage
// until ctx ends. An entry that cannot be acknowledged stays leased and
// comes back when its lease expires: a duplicate, never a loss.
func (f *queueFrontier) flushAcks(ctx context.Context) (refused []*Request) {
	for {
		// The requests added so far go with this batch's links: stored
		// before any page finished meanwhile is acknowledged.
		f.added.flushMu.Lock()
		f.mu.Lock()
		n := min(len(f.acks), maxAckBatch)
		var adds *linkBatch
		var dups []*Request
		if n > 0 {
			adds, dups = f.takeAddsLocked()
		}
		batch := slices.Clone(f.acks[:n])
		f.acks = f.acks[n:]
		if len(f.acks) == 0 {
			f.acks = nil
		}
		ids := make([]string, n)
		for i, a := range batch {
			ids[i] = a.id
		}
		f.acking += n
		f.ackingIDs = ids
		f.mu.Unlock()
		if n == 0 {
			f.added.flushMu.Unlock()
			return refused
		}
		var seen []*Request
		ids, seen = f.storeBatchLinks(ctx, batch, ids, adds)
		f.added.flushMu.Unlock()
		refused = append(refused, dups...)
		refused = append(refused, seen...)
		var req *Request
		if n == 1 {
			req = batch[0].req
		}
		if len(ids) > 0 {
			pages := f.takePages(ids...) // recrawl states, stored with the acks (recrawl.go)
			if err := f.out.persist(ctx, "ack", req, func(ctx context.Context) error { return f.ackWith(ctx, ids, pages) }); err != nil {
				f.c.logger.Warn("acknowledging queue entries", "entries", len(ids), "err", err)
				f.checkUnknownLease(ctx, err)
			}
		}
		f.mu.Lock()
		f.acking -= n
		f.ackingIDs = nil // one flush at a time (combineAcks): these were all
		f.mu.Unlock()
		f.freeSlots(slices.ContainsFunc(batch, func(a ackEntry) bool { return a.soon }))
		f.signal()
	}
}

// storeBatchLinks stores the links of a batch of finished pages in one
// round trip and returns the lease IDs to acknowledge: all of them, or,
// when the storage would not take the links, those of the pages without
// links (the others are released, so that their callbacks run again).
func (f *queueFrontier) storeBatchLinks(ctx context.Context, batch []ackEntry, ids []string, adds *linkBatch) ([]string, []*Request) {
	var all linkBatch
	for _, a := range batch {
		if a.links != nil {
			all.data = append(all.data, a.links.data...)
			all.reqs = append(all.reqs, a.links.reqs...)
		}
	}
	if adds != nil {
		all.data = append(all.data, adds.data...)
		all.reqs = append(all.reqs, adds.reqs...)
	}
	if len(all.data) == 0 {
		return ids, nil
	}
	refused, err := f.storeLinks(ctx, &all)
	if err == nil {
		return ids, refused
	}
	f.c.logger.Warn("storing the links of finished pages; they will be fetched again", "pages", len(batch), "links", len(all.data), "err", err)
	// Requests added with AddURL may come from any of the pages: they stay
	// buffered for the next flush, and every page goes back.
	f.restoreAdds(adds)
	ids = ids[:0]
	for _, a := range batch {
		if a.links == nil && adds == nil {
			ids = append(ids, a.id)
			continue
		}
		a.req.entry.lostChild.Store(true)
		f.settle(ctx, a.id, a.req, false)
	}
	return ids, nil
}

// settle acknowledges (ack) or releases an entry, retrying a failing
// storage until ctx ends. An entry that cannot be settled stays leased and
// comes back when its lease expires: a duplicate, never a loss.
func (f *queueFrontier) settle(ctx context.Context, id string, req *Request, ack bool) {
	op := "release"
	do := func(ctx context.Context) error { return f.q.Release(ctx, id, time.Time{}) }
	pages := f.takePages(id) // recrawl.go: stored with the ack; a released page is judged again
	if ack {
		op = "ack"
		do = func(ctx context.Context) error { return f.ackWith(ctx, []string{id}, pages) }
	}
	if err := f.out.persist(ctx, op, req, do); err != nil {
		f.c.logger.Warn("settling queue entry", "op", op, "url", logURL(req), "err", err)
		f.checkUnknownLease(ctx, err)
	}
}

// startBackground starts the goroutine that renews the leases the run
// holds. close stops it.
func (f *queueFrontier) startBackground() {
	if _, ok := f.q.(storage.LeaseRenewer); !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stopRenew = cancel
	f.bgWG.Go(func() { f.renewLoop(ctx) })
}

// renewLoop renews every lease the run holds, every third of the lease
// TTL, in one round trip: entries leased ahead wait behind slow hosts for
// as long as they must without expiring and being fetched twice.
func (f *queueFrontier) renewLoop(ctx context.Context) {
	t := time.NewTicker(queueLeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		ids := f.heldIDs()
		if len(ids) == 0 {
			continue
		}
		err := storage.RenewLeases(ctx, f.q, queueLeaseTTL, ids...)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case fatalStorageError(err):
			f.fail("renew", err)
		default:
			f.checkUnknownLease(ctx, err)
			// Unknown leases expired before a renewal reached them (a
			// storage outage longer than the TTL): another consumer may
			// fetch them too. Failures are retried at the next tick.
			f.c.logger.Warn("renewing queue leases", "leases", len(ids), "err", err)
		}
	}
}

// close acknowledges the finished entries not yet acknowledged and
// releases every entry leased and not finished, so that nothing is lost
// when a run stops. Each released entry keeps its admission for its next
// delivery. A storage that fails gets queueStopGrace for the
// acknowledgements and as long again for the releases; entries it does not
// take come back when their leases expire. It discards nothing, so it
// returns nil.
func (f *queueFrontier) close() []*Request {
	// From now on AddURL pushes at once; what it buffered is stored below.
	f.detachAdds()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	if f.stopRenew != nil {
		f.stopRenew()
		f.bgWG.Wait()
	}
	// Finished entries nobody is acknowledging (the workers have exited).
	ackCtx, cancelAcks := context.WithTimeout(context.Background(), queueStopGrace)
	f.combineAcks(ackCtx)
	f.flushAddsAtClose(ackCtx)
	if f.hosts.hq != nil {
		// The hosts' next starts since the last lease: a run resumed
		// from this store waits for them.
		f.flushReady(ackCtx)
	}
	cancelAcks()
	f.mu.Lock()
	leased := f.leased
	f.leased = map[string]*Request{}
	buf := f.buf
	f.buf = nil
	f.mu.Unlock()
	if len(leased) == 0 && len(buf) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueStopGrace)
	defer cancel()
	for id, req := range leased {
		f.settle(ctx, id, req, false)
	}
	ids := make([]string, len(buf))
	for i, e := range buf {
		ids[i] = e.ID
	}
	if err := storage.ReleaseBatch(ctx, f.q, time.Time{}, ids...); err != nil {
		f.c.logger.Warn("releasing queue entries", "entries", len(ids), "err", err)
	}
	return nil
}
