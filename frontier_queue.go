package magpie

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/storage"
)

// queueLeaseTTL is how long a leased queue entry stays ours before another
// consumer may take it over. A run renews the leases it holds every third of
// it (see queueFrontier.renewLoop), so an entry waiting behind a slow host
// keeps its lease, and a crashed consumer's entries come back within one TTL
// of its last renewal. A variable for the tests.
var queueLeaseTTL = 5 * time.Minute

// DefaultQueueLookahead is the most queue entries a queue run holds leased
// and unfinished, when QueueLookahead does not set it, while few hosts have
// entries in hand; with many, the default grows with them (limitLocked).
const DefaultQueueLookahead = 512

// surplusBudget bounds the leased entries beyond hostAhead of their host:
// half the look-ahead, so a frontier dominated by one host can never hold
// all of it.
func (f *queueFrontier) surplusBudget() int { return max(f.base, f.limitLocked()/2) }

// autoLookaheadPerHost is how many entries the default look-ahead allows
// per host that has entries in hand, and maxAutoLookahead its ceiling. A
// FIFO queue of a crawl of many hosts has at its head runs of entries for
// hosts waiting out their Delay (a page's links are mostly its own host's):
// to keep every host started, a run must lease past them, and how far
// grows with the hosts. On 2,000 hosts × 50 pages with a 2 s Delay, 24 per
// host reached 0.87× the ideal rate and 32 per host 0.95× (the fixed 512:
// 0.21×; bench/RESULTS.md).
const (
	autoLookaheadPerHost = 32
	maxAutoLookahead     = 1 << 16
)

// limitLocked is the look-ahead cap: limit, or with the default
// (QueueLookahead unset) and a queue that renews leases, as much more as the
// hosts with entries in hand call for, up to maxAutoLookahead.
func (f *queueFrontier) limitLocked() int {
	if !f.autoLimit {
		return f.limit
	}
	return max(f.limit, min(autoLookaheadPerHost*len(f.held), maxAutoLookahead))
}

// hostAhead is how many leased, unfinished entries a host holds before the
// next entry for it counts as surplus: one downloading and one ready to
// start when its turn comes.
const hostAhead = 2

// leaseBatch is the most entries one Lease call asks for.
const leaseBatch = 32

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
// so that the parent's callbacks run again and find the link again. A
// storage that fails for good (it lost its contents, or cannot be used
// again) ends the run with its error; a spent MaxRequests ends it too,
// leaving the rest queued (see frontier_faults.go).
type queueFrontier struct {
	c      *Collector
	cfg    *config
	q      storage.Queue
	notify <-chan struct{}
	out    *outages
	// base is how many entries are always leased ahead (2 per worker);
	// limit caps the look-ahead beyond it (QueueLookahead), which only a
	// queue that renews leases gets: entries leased beyond base may wait
	// behind slow hosts for longer than a lease.
	base, limit int
	// autoLimit is set when the look-ahead is the default, which grows
	// with the hosts (limitLocked).
	autoLimit bool
	// wake has room for one value: finish signals a waiting next.
	wake chan struct{}
	// reclaim is set when a Lease failed: its reply may have been lost
	// after the storage granted entries. Only the feeder (next) uses it.
	reclaim bool

	// bgOnce starts the lease renewal goroutine on the first next; close
	// stops it.
	bgOnce    sync.Once
	stopRenew context.CancelFunc
	bgWG      sync.WaitGroup

	// mu guards the fields below.
	mu     sync.Mutex
	leased map[string]*Request
	// decoded holds the requests of buf's entries, decoded by premark.
	// Only the feeder uses it.
	decoded map[string]*Request
	// buf holds entries leased in a batch and not yet handed out; they
	// count in inflight.
	buf []storage.Entry
	// held counts the leased, unfinished entries per host; surplus counts
	// those beyond hostAhead of their host. streak counts the entries
	// leased beyond base in a row that were surplus, less one per finished
	// entry. Leasing beyond base stops when streak reaches base: the
	// queue's next entries are for hosts that have work already. Each
	// finish then allows one more probe, so the look-ahead of a frontier
	// dominated by a few hosts (or one) stays about base+hostAhead per
	// host, and consumers sharing a queue do not take each other's work;
	// a frontier of many hosts keeps finding hosts with too little work
	// and leases on, up to limit.
	held    map[string]int
	surplus int
	streak  int
	// acks are finished entries not acknowledged yet; acking counts those
	// being sent (their IDs in ackingIDs).
	acks      []ackEntry
	acking    int
	ackingIDs []string
	flushing  bool // a combineAcks is sending acks
	closed    bool
	// pushed holds the visited keys of links this run pushed and has not
	// leased yet. Links are marked visited only when leased (see
	// Collector.admit), so without it every duplicate link found before
	// its first copy is leased would be pushed too, filling a bounded
	// queue with duplicates. Losing it in a crash is harmless: the first
	// copy is in the storage.
	pushed map[uint64]struct{}
	// added buffers what queue.AddURL and AddRequest give the run (see
	// frontier_adds.go).
	added    addBuffer
	inflight int
	errs     []error
	// fatalErr is the storage error that ended the run (see fail); fatal
	// is closed when it is set.
	fatalErr error
	fatal    chan struct{}
	// budgetNoted is set once the run has logged that MaxRequests is
	// reached. Only the feeder uses it.
	budgetNoted bool

	// hosts is set up when the queue is a storage.HostQueue, which leases
	// by host (see frontier_hosts.go); the look-ahead above is then unused.
	hosts hostLeasing
}

// queueEntry is a request's bookkeeping for a queue run (RunQueue): where
// its entry is leased, how it was admitted, and the links its callbacks
// find. The queue frontier owns it; admission (Collector.admit) reads
// deferMark, redelivered, premark and ownsMark, and a callback's Visit sets
// parent and deferMark on the link it makes. A request of an in-memory
// crawl leaves it zero.
type queueEntry struct {
	// leaseID is the queue lease this request came from (RunQueue only).
	leaseID string
	// redelivered is set on a request whose queue entry was leased before:
	// it kept its first delivery's admission.
	redelivered bool
	// ownsMark lets admission take over an existing visited mark, which
	// may be this request's own from an earlier delivery of its parent.
	ownsMark bool
	// deferMark is set on links found during a queue run: admission checks
	// them but leaves the MaxRequests slot and the visited mark to the
	// lease of their queue entry (see Collector.admit).
	deferMark bool
	// onLease is set while an entry is admitted on its lease: the request
	// then stays in memory until it starts (see robotsWhilePaused).
	onLease bool
	// admitted is set on requests the collector admitted before queueing
	// them; a queue entry without it is admitted when leased.
	admitted bool
	// parent is the request whose callbacks made this one in a queue run,
	// until the push of this one is over (see queueFrontier.push).
	parent *Request
	// lostChild is set when a link found by this request's callbacks could
	// not be stored: its queue entry is then released, not acknowledged, so
	// that its callbacks run again and find the link again.
	lostChild atomic.Bool
	// links collects, in a queue run, the links this request's callbacks
	// find until it finishes (guarded by its queueFrontier's mu); batchLinks
	// is set while it does, for admission to read without that lock.
	links      *linkBatch
	batchLinks atomic.Bool
	// premark is set on a leased entry whose visited mark its Lease batch
	// set (premarkAdded) or found set (premarkSeen); see queueFrontier.premark.
	premark uint8
	// aheadHost is the host this request was counted under in the queue
	// look-ahead (its URL may change with redirects).
	aheadHost string
	// hostReady is its host's ready time as a HostQueue stored it when
	// the entry was leased: the gate starts it no sooner (Gate.PutAfter).
	hostReady time.Time
}

func newQueueFrontier(c *Collector, cfg *config, q storage.Queue, workers int) *queueFrontier {
	f := &queueFrontier{c: c, cfg: cfg, q: q, out: newOutages(c), base: 2 * workers, limit: 2 * workers,
		wake: make(chan struct{}, 1), leased: map[string]*Request{},
		held: map[string]int{}, pushed: map[uint64]struct{}{}, fatal: make(chan struct{})}
	f.out.onFatal = f.fail
	f.out.onRecover = f.checkResetAfterOutage
	if _, ok := q.(storage.LeaseRenewer); ok {
		f.limit = max(f.base, cfg.lookahead())
		f.autoLimit = cfg.queueLookahead <= 0
	}
	if n, ok := q.(storage.QueueNotifier); ok {
		f.notify = n.Notify()
	}
	f.initHosts(q)
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
	req.entry.admitted = !req.entry.deferMark
	dedupe := req.entry.deferMark && req.checkRevisit && !f.cfg.allowRevisit
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
	if err == nil && f.addToBatch(req, data) {
		return nil
	}
	if err == nil {
		err = f.out.persist(ctx, "push", req, func(ctx context.Context) error {
			return f.pushReqs(ctx, []*Request{req}, [][]byte{data})
		})
	}
	if err != nil && dedupe {
		f.mu.Lock()
		delete(f.pushed, req.visitKey)
		f.mu.Unlock()
	}
	if err != nil && req.entry.parent != nil && errors.Is(err, ErrStorageUnavailable) {
		req.entry.parent.entry.lostChild.Store(true)
	}
	return err
}

// retry releases req's entry with a not-before time: the waiting retry holds
// no worker, survives a crash, and keeps its place among the entries. Its
// next delivery counts as the next attempt (see lease).
func (f *queueFrontier) retry(ctx context.Context, req *Request, notBefore time.Time) error {
	if req.entry.leaseID == "" {
		return errors.New("retry of a request that has no queue lease")
	}
	if req.entry.lostChild.Load() {
		// Its callbacks ran and lost a link: the whole page runs again.
		notBefore = time.Time{}
	}
	f.flushLinks(ctx, req)
	if req.entry.lostChild.Load() {
		notBefore = time.Time{}
	}
	err := f.out.persist(ctx, "release", req, func(ctx context.Context) error { return f.q.Release(ctx, req.entry.leaseID, notBefore) })
	if err != nil {
		return err
	}
	f.freeSlots(f.noteReady(req))
	f.mu.Lock()
	delete(f.leased, req.entry.leaseID)
	f.done(req)
	f.mu.Unlock()
	f.signal()
	return nil
}

// done removes a finished request from the look-ahead counts; f.mu is held.
func (f *queueFrontier) done(req *Request) {
	f.inflight--
	if f.streak > 0 {
		f.streak--
	}
	h := req.entry.aheadHost
	if f.held[h] > hostAhead {
		f.surplus--
	}
	if f.held[h]--; f.held[h] <= 0 {
		delete(f.held, h)
	}
}

// count adds a leased request to the look-ahead counts; f.mu is held.
func (f *queueFrontier) count(req *Request) {
	h := req.URL.Host
	req.entry.aheadHost = h
	extra := f.held[h] >= hostAhead
	if extra {
		f.surplus++
	}
	f.held[h]++
	switch {
	case f.inflight <= f.base:
	case extra:
		f.streak++
	default:
		f.streak = 0
	}
}

// room reports whether another entry may be leased: always up to base,
// and up to limit while the entries leased lately were for hosts that had
// too little work to start (see held).
func (f *queueFrontier) room() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.buf) > 0 || f.inflight < f.base {
		return true
	}
	if f.hosts.hq != nil {
		return f.inflight < f.hostRoomLocked()
	}
	return f.inflight < f.limitLocked() && f.surplus < f.surplusBudget() && f.streak < f.streakLimit()
}

// streakLimit is how many surplus entries in a row end leasing beyond
// base: more when more hosts have work, since a lease then has to pass
// over more of their entries to find the one host that needs another.
func (f *queueFrontier) streakLimit() int { return max(f.base, 4*len(f.held)) }

// streakPatience is how long a run waits, with no request finished and no
// entry leased, before a streak stops holding it back. A streak ends
// leasing on the premise that a finishing request soon makes room; when
// the requests in hand all wait out a long Delay nothing finishes, and the
// hosts queued behind them would wait that Delay too. Past the patience
// the streak is cleared and leasing goes on, still within the surplus
// budget and the look-ahead.
const streakPatience = 100 * time.Millisecond

// leaseSize is how many entries the next Lease asks for.
func (f *queueFrontier) leaseSize() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	room := f.base - f.inflight
	if f.hosts.hq != nil {
		room = f.hostRoomLocked() - f.inflight
	} else if budget := min(f.surplusBudget()-f.surplus, f.streakLimit()-f.streak); budget > 0 {
		// Each entry adds at most one to surplus and to streak, so the
		// batch cannot overshoot either.
		room = max(room, min(f.limitLocked()-f.inflight, budget))
	}
	n := min(max(room, 1), leaseBatch)
	if left := f.budgetLeftLocked(); left >= 0 {
		// Never lease more than MaxRequests can still admit: an entry
		// leased past it would be refused, and deleted or delivered again.
		n = min(n, left)
	}
	return n
}

func (f *queueFrontier) next(ctx context.Context) (*Request, error) {
	f.bgOnce.Do(f.startBackground)
	idleWait := time.Millisecond
	// stalled is how long the waits below have lasted with no request
	// finished (see streakPatience).
	var stalled time.Duration
	failures := 0 // consecutive Lease or Len failures
	for {
		if f.failed() {
			return nil, errFrontierDone
		}
		var backoff time.Duration
		if f.room() {
			req, err := f.lease(ctx)
			if err == nil {
				return req, nil
			}
			switch {
			case f.failed():
				return nil, errFrontierDone
			case errors.Is(err, errRefused):
				continue
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.Is(err, errBudgetSpent):
				if f.quiet() {
					return nil, errFrontierDone
				}
			case fatalStorageError(err):
				f.fail("lease", err)
				return nil, errFrontierDone
			case errors.Is(err, storage.ErrQueueEmpty):
				// Requests added with AddURL may be all the work left.
				if flushed, ferr := f.flushAdds(ctx); flushed && ferr == nil {
					continue
				} else if ferr != nil && ctx.Err() != nil {
					return nil, ctx.Err()
				}
				done, err := f.drained(ctx)
				switch {
				case err == nil && done:
					return nil, errFrontierDone
				case err == nil:
					failures = 0
				case ctx.Err() != nil:
					return nil, ctx.Err()
				case fatalStorageError(err):
					f.fail("len", err)
					return nil, errFrontierDone
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
			if !f.sleep(ctx, backoff) {
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
			stalled = 0
		case <-t.C:
			if stalled += idleWait; stalled >= streakPatience {
				f.mu.Lock()
				f.streak = 0
				f.mu.Unlock()
				stalled = 0
			}
			idleWait = min(2*idleWait, 200*time.Millisecond)
		case <-f.fatal:
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

// lease takes one entry and makes it a request. Entries are leased in
// batches (one round trip); the rest of a batch waits in buf, counted in
// flight. A Lease failure is returned as is (next backs off); a visited-set
// failure during admission keeps the entry leased and retries the
// admission until ctx ends.
func (f *queueFrontier) lease(ctx context.Context) (*Request, error) {
	e, ok := f.fromBuf()
	if !ok {
		n := f.leaseSize()
		if n == 0 {
			return nil, errBudgetSpent
		}
		started := time.Now()
		if err := f.reclaimLost(ctx); err != nil {
			return nil, err
		}
		var es []storage.Entry
		var err error
		if f.hosts.hq != nil {
			es, err = f.leaseHosts(ctx, n)
		} else {
			es, err = f.q.Lease(ctx, n, queueLeaseTTL)
		}
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
			f.reclaim = true
			return nil, err
		}
		f.out.recovered("lease", started)
		if len(es) == 0 {
			return nil, storage.ErrQueueEmpty
		}
		e = es[0]
		f.premark(ctx, es)
		f.mu.Lock()
		f.buf = append(f.buf, es[1:]...)
		f.inflight += len(es) - 1
		f.mu.Unlock()
	}
	f.mu.Lock()
	f.inflight++ // counted at once, so that room sees it
	f.mu.Unlock()
	admitted := false
	defer func() {
		// Deferred: OnError of a refused entry may end the goroutine.
		if !admitted {
			f.mu.Lock()
			f.inflight--
			f.mu.Unlock()
		}
	}()
	req, err := f.admitEntry(ctx, e)
	if err != nil {
		return nil, err
	}
	admitted = true
	req.entry.leaseID = e.ID
	req.entry.hostReady = e.HostReady
	f.mu.Lock()
	f.leased[e.ID] = req
	f.count(req)
	f.mu.Unlock()
	// The links its callbacks find are batched until it finishes.
	req.entry.links = &linkBatch{}
	req.entry.batchLinks.Store(true)
	return req, nil
}

// fromBuf takes the next entry of the last leased batch.
func (f *queueFrontier) fromBuf() (storage.Entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.buf) == 0 {
		return storage.Entry{}, false
	}
	e := f.buf[0]
	f.buf[0] = storage.Entry{}
	f.buf = f.buf[1:]
	f.inflight--
	return e, true
}

// admitEntry makes a leased entry a request, admitting it if it was queued
// without admission. A refused or undecodable entry is settled and
// errRefused returned.
func (f *queueFrontier) admitEntry(ctx context.Context, e storage.Entry) (*Request, error) {
	req, err := f.decoded[e.ID], error(nil)
	if req != nil {
		delete(f.decoded, e.ID)
	} else {
		req, err = f.c.unmarshalRequest(e.Data)
	}
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
	req.entry.redelivered = e.Deliveries > 1
	if req.entry.admitted {
		if req.marked {
			req.visitKey = urlkey.RequestKey(req.Method, urlkey.Canonical(req.URL, f.cfg.sortQuery), req.bodyBytes)
		}
	} else {
		// A redelivered entry was admitted on its first delivery (unless a
		// stop cut that short): it holds a MaxRequests slot and, most
		// likely, the visited mark, which it takes over instead of being
		// refused as visited. The other checks run again; they are cheap.
		req.Depth = max(req.Depth, 1)
		req.checkRevisit = true
		req.entry.ownsMark = req.entry.redelivered || req.entry.premark == premarkUnknown
		premarked := req.entry.premark == premarkAdded
		req.entry.onLease = true
		err := f.admitLeased(ctx, req)
		req.entry.onLease = false
		if err != nil && premarked && !req.marked {
			// Refused after its mark was set with its batch's: take the
			// mark back, as if it had never been set.
			req.marked = true
			f.c.forgetVisited(req)
		}
		if err != nil && (ctx.Err() != nil || f.failed() || errors.Is(err, ErrMaxRequests)) {
			// The run stopped during admission (a robots.txt fetch, a
			// storage outage, a store found unusable), or MaxRequests was
			// reached meanwhile (by a c.Visit of a callback): the entry
			// was not refused, so it goes back, still counted as pushed.
			// (Released, it counts as delivered once: a later run takes
			// no MaxRequests slot for it, as for an entry released at Stop.)
			f.settle(ctx, e.ID, req, false)
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.Is(err, ErrMaxRequests):
				return nil, errBudgetSpent
			}
			return nil, err
		}
		// Admitted (the visited mark now dedupes it) or refused: either
		// way it is no longer a pending push of this run.
		f.forgetPushed(req)
		if err != nil {
			req.err = err
			// Deferred: settled even if OnError ends the goroutine
			// (runtime.Goexit; the run starts another feeder). What
			// OnRefused added with AddURL is stored first.
			added := f.addsCount()
			defer func() {
				ack := true
				if f.addsCount() != added {
					// Not stored: the entry comes back rather than be
					// acknowledged ahead of what its OnRefused added.
					if _, ferr := f.flushAdds(ctx); ferr != nil {
						ack = false
					}
				}
				f.settle(ctx, e.ID, req, ack)
			}()
			f.c.refuse(req, err)
			return nil, errRefused
		}
	}
	return req, nil
}

// premark values: a request's visited mark was set (or found set) with the
// other entries of its Lease batch, so its admission needs no round trip.
const (
	premarkAdded uint8 = 1 + iota
	premarkSeen
	// premarkUnknown: the batch's AddVisited failed, and may have set
	// the marks before its reply was lost. Admission marks the entry
	// itself and takes an existing mark over (ownsMark): at worst a
	// duplicate fetch, never an entry refused as visited by its own mark.
	premarkUnknown
)

// premark decodes a leased batch and, for the entries admitted on their
// lease, sets their visited marks in one AddVisited call (one round trip
// for the batch, where admission would make one per entry). Admission then
// reads the result (Request.premark) and takes back the mark of an entry
// it refuses for another reason. The feeder alone calls it. A failure
// leaves admission to mark each entry itself.
func (f *queueFrontier) premark(ctx context.Context, es []storage.Entry) {
	vs, ok := f.c.storage().(storage.VisitedSet)
	if !ok || len(es) < 2 || f.cfg.allowRevisit {
		return
	}
	if f.decoded == nil {
		f.decoded = map[string]*Request{}
	}
	var keys []uint64
	var reqs []*Request
	for _, e := range es {
		req, err := f.c.unmarshalRequest(e.Data)
		if err != nil {
			continue // admitEntry reports it
		}
		f.decoded[e.ID] = req
		if req.entry.admitted {
			continue
		}
		req.visitKey = urlkey.RequestKey(req.Method, urlkey.Canonical(req.URL, f.cfg.sortQuery), req.bodyBytes)
		keys = append(keys, req.visitKey)
		reqs = append(reqs, req)
	}
	if len(keys) == 0 {
		return
	}
	added, err := vs.AddVisited(ctx, keys...)
	if err != nil || len(added) != len(keys) {
		for _, req := range reqs {
			req.entry.premark = premarkUnknown
		}
		return
	}
	for i, req := range reqs {
		req.entry.premark = premarkSeen
		if added[i] {
			req.entry.premark = premarkAdded
		}
	}
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
	if err := r.ReleaseUnheld(ctx, f.heldIDs()); err != nil {
		return err
	}
	f.reclaim = false
	return nil
}

// heldIDs lists the leases the run holds: entries handed out and not
// finished, leased in a batch and not handed out yet, and finished but not
// acknowledged yet (they are ours until their Ack is through).
func (f *queueFrontier) heldIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.leased)+len(f.buf)+len(f.acks)+len(f.ackingIDs))
	for id := range f.leased {
		ids = append(ids, id)
	}
	for _, e := range f.buf {
		ids = append(ids, e.ID)
	}
	for _, a := range f.acks {
		ids = append(ids, a.id)
	}
	return append(ids, f.ackingIDs...)
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
		if fatalStorageError(se.Err) {
			f.fail("visited", se.Err)
			return err
		}
		f.out.failed(se.Op, attempt, se.Err, req)
		// The failed call may have written the mark before its reply was
		// lost: the next try takes the mark over rather than refuse the
		// entry as visited (at worst a duplicate fetch, never a loss).
		req.entry.ownsMark = true
		if !sleepCtx(ctx, storageBackoff(attempt)) {
			return ctx.Err()
		}
	}
}

// drained reports whether the crawl is over: nothing of ours in flight or
// waiting for its acknowledgement, and nothing left in the queue (nor leased
// by another consumer, nor waiting for a retry's not-before time).
func (f *queueFrontier) drained(ctx context.Context) (bool, error) {
	f.mu.Lock()
	busy := f.inflight > 0 || len(f.acks) > 0 || f.acking > 0 || f.addsPendingLocked()
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
	if l.Total() > 0 {
		return false, nil
	}
	// An empty queue ends the crawl only if it was not emptied by a store
	// that lost its contents (see checkReset).
	if err := f.checkReset(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// idle never fires: a queue run ends when the queue is drained.
func (f *queueFrontier) idle() <-chan struct{} { return nil }

func (f *queueFrontier) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
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
	delete(f.pushed, urlkey.RequestKey(req.Method, urlkey.Canonical(req.URL, f.cfg.sortQuery), req.bodyBytes))
}
