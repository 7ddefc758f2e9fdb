package magpie

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// A queue run over a storage.HostQueue (the in-memory queue, sqlitestore,
// redisstore) leases by host: the storage hands out only entries of hosts
// that may start soon and hold few entries leased, highest priority first.
// The run then needs none of the look-ahead that a FIFO queue calls for
// (queueFrontier.room): every entry it leases is one its host can start
// within hostLead, so it leases while it has room and the storage has
// such entries, and waits otherwise.

// hostLead is how far ahead of the clock a run asks for hosts that are
// ready: an entry of a host whose Delay ends within it is leased now and
// waits its turn in the gate (Gate.PutAfter holds it until the host's
// stored ready time), so that the next request of a host starts when its
// Delay ends and not one lease round later.
const hostLead = time.Second

// hostsAhead is how many entries of one host a run may hold leased per
// request the host may have in flight: one downloading and one waiting
// for its turn.
const hostsAhead = 2

// leasePace is the least time from a lease that came back short (fewer
// entries than asked: the store had no more of hosts ready within
// hostLead) to the next, unless an entry has been acknowledged since
// whose host may start again within hostLead (freeSlots). Each finished
// request wakes the run, and without the pace a broad crawl asked the
// store again at every one, though the host that finished waits out its
// Delay: over Redis, 57% of 2,200 leases a second came back empty.
// Entries are leased hostLead ahead of their start, so the pace delays
// none; a finished request of a host without a Delay frees a slot it can
// use at once, so its acknowledgement ends the pace.
const leasePace = 20 * time.Millisecond

// hostProbe is a host name no LimitRule should single out: a rule that
// matches it is taken to match every host (see Limiter.MostParallel).
const hostProbe = "magpie-frontier-probe.invalid"

// hostLeasing is the part of a queueFrontier that a HostQueue needs.
type hostLeasing struct {
	hq storage.HostQueue
	// perHost is the most entries of one host leased at once (by every
	// consumer of the store): hostsAhead times the most requests the
	// limits let any host have in flight; 0 when some host has no limit.
	perHost int

	// readyMu guards ready: the next allowed start of the hosts whose
	// requests finished since the last lease, stored with the next
	// LeaseHosts (see noteReady).
	readyMu sync.Mutex
	ready   map[string]time.Time

	// shortAt is when the last lease came back short (zero: it did not);
	// the next one waits until leasePace after it, or until freed says
	// that a slot of a host that can start soon was freed (see leasePace).
	// Only the run's feeder leases.
	shortAt time.Time
	freed   chan struct{}

	// warnedPriority is set once a request with a priority was pushed to
	// a queue that is not a HostQueue (see notePriorityIgnored).
	warnedPriority atomic.Bool
}

// initHosts sets the run up for a HostQueue, if q is one.
func (f *queueFrontier) initHosts(q storage.Queue) {
	hq, ok := q.(storage.HostQueue)
	if !ok {
		return
	}
	f.hosts.hq = hq
	f.hosts.freed = make(chan struct{}, 1)
	// A queue run has its threads, so a host no rule limits has no limit
	// (run.newRun sets no host cap).
	if most := f.c.shared.limiter.MostParallel(hostProbe, 0); most > 0 {
		f.hosts.perHost = max(hostsAhead, hostsAhead*most)
	}
}

// hostRoomLocked is how many entries a run over a HostQueue may hold
// leased and unfinished: QueueLookahead when set, else maxAutoLookahead.
// Every one is an entry its host can start soon, so the bound is only a
// guard on memory; the gate's room and perHost are what bound a crawl.
// f.mu is held.
func (f *queueFrontier) hostRoomLocked() int {
	if f.cfg.queueLookahead > 0 {
		return max(f.base, f.cfg.queueLookahead)
	}
	return max(f.base, maxAutoLookahead)
}

// hostEntry is what a HostQueue stores for req, whose marshalled form is data.
func hostEntry(req *Request, data []byte) storage.HostEntry {
	return storage.HostEntry{Host: req.URL.Host, Priority: req.Priority, Data: data}
}

// pushReqs pushes data, the marshalled reqs, with their hosts and
// priorities when the queue is a HostQueue.
func (f *queueFrontier) pushReqs(ctx context.Context, reqs []*Request, data [][]byte) error {
	if f.hosts.hq == nil {
		f.notePriorityIgnored(reqs)
		return f.q.Push(ctx, data...)
	}
	es := make([]storage.HostEntry, len(data))
	for i := range data {
		es[i] = hostEntry(reqs[i], data[i])
	}
	return f.hosts.hq.PushHosted(ctx, es...)
}

// pushUnvisited is storage.PushUnvisited, with hosts and priorities when
// the queue is a HostQueue.
func (f *queueFrontier) pushUnvisited(ctx context.Context, st storage.Storage, keys []uint64, reqs []*Request, data [][]byte) ([]bool, error) {
	if f.hosts.hq == nil {
		f.notePriorityIgnored(reqs)
		return storage.PushUnvisited(ctx, st, f.q, keys, data)
	}
	es := make([]storage.HostEntry, len(data))
	for i := range data {
		es[i] = hostEntry(reqs[i], data[i])
	}
	return storage.PushUnvisitedHosted(ctx, st, f.hosts.hq, keys, es)
}

// noteReady records when req's host may start again, read from its
// finished request's Ticket, to be stored with the next lease: a resumed
// crawl, or another consumer of the store, then waits for it too. A host
// without a Delay (its next start not in the future) needs nothing stored.
// It reports whether the host may start again within hostLead: the
// store's slot that the request's entry frees, once acknowledged, is then
// one the next lease can fill (see freeSlots).
func (f *queueFrontier) noteReady(req *Request) (soon bool) {
	if f.hosts.hq == nil {
		return false
	}
	if req.ticket == nil {
		return true
	}
	t := req.ticket.NextStart()
	now := time.Now()
	soon = t.Before(now.Add(hostLead))
	if !t.After(now) {
		return soon
	}
	h := &f.hosts
	h.readyMu.Lock()
	if h.ready == nil {
		h.ready = map[string]time.Time{}
	}
	if old, ok := h.ready[req.URL.Host]; !ok || t.After(old) {
		h.ready[req.URL.Host] = t
	}
	h.readyMu.Unlock()
	return soon
}

// freeSlots ends the lease pace once entries are acknowledged or released
// of which one was of a host that may start again soon (noteReady).
func (f *queueFrontier) freeSlots(soon bool) {
	if soon && f.hosts.freed != nil {
		select {
		case f.hosts.freed <- struct{}{}:
		default:
		}
	}
}

// flushReady stores the ready times noted since the last call. A failure
// keeps them for the next call: they are advice, the gate enforces the
// Delay in this process whatever the store says.
func (f *queueFrontier) flushReady(ctx context.Context) {
	h := &f.hosts
	h.readyMu.Lock()
	ready := h.ready
	h.ready = nil
	h.readyMu.Unlock()
	if len(ready) == 0 {
		return
	}
	if err := h.hq.SetHostReady(ctx, ready); err != nil {
		h.readyMu.Lock()
		if h.ready == nil {
			h.ready = ready
		} else {
			for k, t := range ready {
				if old, ok := h.ready[k]; !ok || t.After(old) {
					h.ready[k] = t
				}
			}
		}
		h.readyMu.Unlock()
		f.c.logger.Debug("storing hosts' ready times", "hosts", len(ready), "err", err)
	}
}

// leaseHosts leases up to n entries of hosts that may start within
// hostLead, storing the ready times noted since the last lease first. It
// waits out leasePace after a lease that came back short.
func (f *queueFrontier) leaseHosts(ctx context.Context, n int) ([]storage.Entry, error) {
	h := &f.hosts
	if wait := time.Until(h.shortAt.Add(leasePace)); !h.shortAt.IsZero() && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.freed:
		case <-f.fatal:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
	// What is freed from here on is news to the next lease, not this one.
	select {
	case <-h.freed:
	default:
	}
	f.flushReady(ctx)
	es, err := h.hq.LeaseHosts(ctx, time.Now().Add(hostLead), n, h.perHost, queueLeaseTTL)
	h.shortAt = time.Time{}
	if err == nil && len(es) < n || errors.Is(err, storage.ErrQueueEmpty) {
		h.shortAt = time.Now()
	}
	return es, err
}

// notePriorityIgnored says once, at Warn, that the queue keeps no
// priorities (a FIFO queue, such as a Colly queue storage), the first time
// a request with one is pushed to it: its entries are leased in push order.
func (f *queueFrontier) notePriorityIgnored(reqs []*Request) {
	if f.hosts.warnedPriority.Load() {
		return
	}
	for _, r := range reqs {
		if r.Priority != 0 {
			if f.hosts.warnedPriority.CompareAndSwap(false, true) {
				f.c.logger.Warn("this queue storage keeps no priorities: its entries are leased in push order",
					"storage", fmt.Sprintf("%T", f.q), "url", logURL(r), "priority", r.Priority)
			}
			return
		}
	}
}
