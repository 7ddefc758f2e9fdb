package magpie

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/internal/scheduler"
	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/storage"
)

// run is one crawl: a scheduler, the frontier that feeds it, and the
// goroutines that move requests between them. A run starts on the first
// admitted request and ends when nothing is pending (Wait), on Stop, or when
// a queue run finds its queue drained.
type run struct {
	c      *Collector
	cfg    *config
	ctx    context.Context
	cancel context.CancelFunc
	front  frontier
	gate   *limits.Gate[*Request]
	sched  *scheduler.Scheduler[*Request, *Response, item]
	// tokens holds one value per download in progress or about to start: the
	// dispatcher takes a token before asking the gate for a request, so a
	// request that leaves the gate starts downloading at once and its host's
	// Delay is measured at the wire.
	tokens chan struct{}
	// queueMode is set for RunQueue runs, whose end is the queue's emptiness.
	queueMode bool
	// drained is closed by the feeder when a queue run has nothing left.
	drained chan struct{}
	// feedCtx ends with ctx, or earlier when a queue run drains: then no
	// request starts, and those started may finish.
	feedCtx  context.Context
	stopFeed context.CancelFunc
	// busyMu guards busy and quiet.
	busyMu sync.Mutex
	// busy counts requests handed to the scheduler and not yet finished.
	busy int
	// quiet, once asked for, is closed when busy falls to zero.
	quiet chan struct{}
	// aborted is set by Stop: links its callbacks find while it shuts down
	// are refused with ErrStopped instead of starting a new crawl.
	aborted atomic.Bool
	// linkHint is the number of links the last page analysed cut (see
	// Request.linkSlot).
	linkHint atomic.Int32
	// wg counts the run's own goroutines (feeder, dispatcher, error drain).
	wg       sync.WaitGroup
	stopOnce sync.Once
	// stopped is closed when every goroutine of the run has exited.
	stopped chan struct{}
	// runnerFields are the callback runners, the calls they run, and the
	// calls given up as stuck (see guard).
	runnerFields
	// cutShort counts a queue run's requests whose fetch the stop cut
	// short in flight: OnError heard of them, and their entries went back
	// to the queue (see countLeftInQueue).
	cutShort atomic.Int64
	// waits are the requests waiting in the frontier for a retry or for
	// robots.txt (Stats.Waits).
	waits waitList
}

// grace is the run's StopGrace.
func (r *run) grace() time.Duration { return cmp.Or(r.cfg.stopGrace, DefaultStopGrace) }

// MaxWorkers is the most downloads a crawl without Workers(n) runs at once.
// Such a crawl's pool follows the LimitRules: it runs as many downloads as
// the active hosts allow (the sum of their Parallelism, within each rule's
// TotalParallelism, DefaultHostParallelism for a host no rule limits), up
// to this ceiling, and fewer when fewer hosts have work.
const MaxWorkers = 256

// DefaultHostParallelism is the most requests in flight to a host that no
// LimitRule limits, in a crawl without Workers(n). With Workers(n) such a
// host may take all n.
const DefaultHostParallelism = 16

// autoWorkerIdle is how long a worker of a pool sized by the limits stays
// without work before it exits.
const autoWorkerIdle = time.Second

// startRun starts a crawl over front with workers download workers; workers
// <= 0 sizes the pool by the limits (MaxWorkers, DefaultHostParallelism).
// It builds the run, starts the scheduler's stages, and spawns the run's
// own goroutines (doc.go's Concurrency section names each).
func (c *Collector) startRun(cfg *config, front frontier, workers int, queueMode bool) (*run, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	auto := workers <= 0
	if auto {
		workers = MaxWorkers
	}
	r := c.newRun(cfg, front, workers, auto, queueMode)
	if err := r.startStages(workers, auto); err != nil {
		// The gate is registered with the shared limiter, which would
		// otherwise keep it.
		r.stopFeed()
		r.cancel()
		r.gate.Close()
		return nil, err
	}
	r.spawn(r.feed)
	r.spawn(r.dispatch)
	r.spawn(r.drainErrors)
	if done := cfg.stdCtx.Done(); done != nil {
		r.spawn(func() { r.reapAfter(done) })
	}
	if cfg.progressEvery > 0 {
		r.spawn(func() { r.progress(r.ctx, cfg.progressEvery) })
	}
	c.logger.Info("crawl started", "workers", workers, "queue", queueMode)
	return r, nil
}

// newRun builds a run over front, its gate registered with the shared
// limiter; nothing runs yet.
func (c *Collector) newRun(cfg *config, front frontier, workers int, auto, queueMode bool) *run {
	c.shared.backend.keepIdleFor(workers)
	parked := cfg.parked(workers)
	if queueMode && cfg.maxParked == 0 {
		// Room for the whole queue look-ahead: the feeder must not block
		// on the gate while hosts it has leased entries for are idle.
		parked = max(parked, cfg.lookahead())
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{
		c: c, cfg: cfg, ctx: ctx, cancel: cancel, front: front, queueMode: queueMode,
		tokens:  make(chan struct{}, workers),
		drained: make(chan struct{}),
		stopped: make(chan struct{}),
		gate:    limits.NewGate[*Request](c.shared.limiter, parked),
		sched:   scheduler.New[*Request, *Response, item](),
	}
	// fetch reports when each request reaches the wire (Ticket.Sent), so
	// a host's Delay is measured as the server sees it.
	r.gate.SetAwaitSent(true)
	if auto {
		r.gate.SetHostCap(DefaultHostParallelism)
	}
	r.runnersQuit = make(chan struct{})
	r.feedCtx, r.stopFeed = context.WithCancel(ctx)
	return r
}

// startStages starts the scheduler's download, analysis and item stages
// (run.download, run.analyze, run.processItemGuarded) with workers download
// and analysis workers; auto makes those pools follow the downloads the
// limits let start.
func (r *run) startStages(workers int, auto bool) error {
	d, err := scheduler.NewDownloader[*Request, *Response]("", nil, r.download)
	if err != nil {
		return err
	}
	a, err := scheduler.NewAnalyzer[*Response, item]("", nil, nil, r.analyze)
	if err != nil {
		return err
	}
	p, err := scheduler.NewPipeline[item]("", nil, false, r.processItemGuarded)
	if err != nil {
		return err
	}
	da := scheduler.DataArgs{
		Request:         scheduler.PoolArgs{BufferCap: workers, MaxBufferNumber: 2},
		Response:        scheduler.PoolArgs{BufferCap: workers, MaxBufferNumber: 2},
		Item:            scheduler.PoolArgs{BufferCap: 16, MaxBufferNumber: 1},
		ErrorBuffer:     64,
		DownloadWorkers: workers,
		AnalyzeWorkers:  workers,
		PipelineWorkers: 1,
	}
	if auto {
		// The pool grows with the downloads the limits let start (the
		// tokens) and shrinks when hosts fall idle.
		da.WorkerIdle = autoWorkerIdle
	}
	ma := scheduler.ModuleArgs[*Request, *Response, item]{
		Downloaders: []scheduler.Downloader[*Request, *Response]{d},
		Analyzers:   []scheduler.Analyzer[*Response, item]{a},
		Pipelines:   []scheduler.Pipeline[item]{p},
	}
	if err := r.sched.Init(da, ma); err != nil {
		return err
	}
	if err := r.sched.Start(r.ctx); err != nil {
		return err
	}
	r.c.counts.start(time.Now())
	return nil
}

// spawn starts a goroutine of the run, counted in wg: shutdown waits for
// every one. It is the one way the run starts its own goroutines (see the
// Concurrency section of doc.go).
func (r *run) spawn(f func()) { r.wg.Go(f) }

// feed moves requests from the frontier to the gate, where each waits for
// its host's turn without holding a worker.
func (r *run) feed() {
	returned := false
	defer func() {
		// A queue frontier runs OnError for entries refused at lease; one
		// that calls runtime.Goexit ends this goroutine (its entry is
		// settled already), so another feeder carries on.
		if !returned && r.feedCtx.Err() == nil {
			r.spawn(r.feed)
		}
	}()
	r.feedLoop()
	returned = true
}

func (r *run) feedLoop() {
	if p, ok := r.front.(pacedFrontier); ok {
		// The gate's bounds (newRun): no host takes more than its
		// share of the room while others wait behind it.
		p.pace(limits.ParkedPerHost, r.cfg.parked(cap(r.tokens)))
	}
	for {
		req, err := r.front.next(r.feedCtx)
		if err != nil {
			if errors.Is(err, errFrontierDone) {
				close(r.drained)
			}
			return
		}
		req.run = r
		r.waits.left(req)
		req.unresolved = nil
		err = r.gate.PutAfter(r.feedCtx, req.URL.Host, req, req.entry.hostReady)
		if errors.Is(err, limits.ErrResolve) && r.feedCtx.Err() == nil {
			if !r.startUnresolved(req, err) {
				return
			}
			continue
		}
		if err != nil {
			r.dropUnstarted(req)
			return
		}
	}
}

// dispatch hands requests whose host may start to the scheduler, one per
// free download token.
func (r *run) dispatch() {
	paced, _ := r.front.(pacedFrontier)
	for {
		select {
		case r.tokens <- struct{}{}:
		case <-r.feedCtx.Done():
			return
		}
		req, ticket, err := r.gate.Get(r.feedCtx)
		if err != nil {
			return
		}
		if paced != nil {
			paced.started(req.URL.Host)
		}
		if !r.submit(req, ticket) {
			return
		}
	}
}

// submit hands req, which holds ticket and a download token, to the
// scheduler. It reports false when the run is stopping: req is then
// finished as never started.
//
// It is the one place a request starts, so it is where Pause holds:
// while the collector is paused, submit waits for Resume, or for the run
// to stop (feedCtx). The request it holds has its host's turn and a
// token, so it is the first to start on Resume; the dispatcher takes no
// other meanwhile.
func (r *run) submit(req *Request, ticket *limits.Ticket) bool {
	req.ticket = ticket
	r.busyMu.Lock()
	r.busy++
	r.busyMu.Unlock()
	err := r.c.awaitResume(r.feedCtx)
	if err == nil {
		err = r.sched.Submit(r.feedCtx, req)
	}
	if err != nil {
		ticket.Done(limits.Result{Err: err})
		r.finish(req, notStartedErr(req))
		return false
	}
	return true
}

// startUnresolved hands req to a download worker outside the gate: its
// host is keyed by PolitenessIP and its name did not resolve (err), so it
// has no slot to wait in, and no key of unknowns takes it. Its fetch runs
// OnRequest and fails with err (fetch.go, unresolved), to OnError, as a
// failed dial does. It reports false when the run is stopping.
func (r *run) startUnresolved(req *Request, err error) bool {
	req.unresolved = err
	if p, ok := r.front.(pacedFrontier); ok {
		// It leaves the frontier's count of requests out, as one the
		// gate lets start does (dispatch).
		p.started(req.URL.Host)
	}
	select {
	case r.tokens <- struct{}{}:
	case <-r.feedCtx.Done():
		r.dropUnstarted(req)
		return false
	}
	return r.submit(req, nil)
}

// settled counts one request handed to the scheduler as done with.
func (r *run) settled() {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	r.busy--
	if r.busy == 0 && r.quiet != nil {
		close(r.quiet)
		r.quiet = nil
	}
}

// drain stops starting requests and waits, at most grace, for those started
// to finish: their callbacks run and their queue entries are acknowledged
// instead of being fetched again after a resume.
func (r *run) drain(grace time.Duration) {
	r.stopFeed()
	r.busyMu.Lock()
	if r.busy == 0 {
		r.busyMu.Unlock()
		return
	}
	if r.quiet == nil {
		r.quiet = make(chan struct{})
	}
	quiet := r.quiet
	r.busyMu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-quiet:
	case <-t.C:
	case <-r.stopped:
	}
}

// reapAfter stops starting requests once done (the StdlibContext) is
// closed, and abandons the callbacks still running a grace later: every
// fetch fails once it is, so a callback that has not returned by then never
// will, and a sync Visit or Wait must not wait for it. (Wait, Visit and
// RunQueue end the run; see waitRun.)
func (r *run) reapAfter(done <-chan struct{}) {
	select {
	case <-done:
	case <-r.ctx.Done():
		return
	}
	// Nothing queued behind a host's Delay is sent now, nor delivered to
	// OnError one by one: the run drops it (see dropUnstarted).
	r.stopFeed()
	t := time.NewTimer(r.grace())
	defer t.Stop()
	select {
	case <-t.C:
		r.reap()
	case <-r.ctx.Done():
	}
}

// drainErrors logs what the scheduler reports. The download and analyze
// modules never fail on purpose, so anything here is a bug worth a warning.
func (r *run) drainErrors() {
	errs := r.sched.Errors()
	for {
		select {
		case err, ok := <-errs:
			if !ok {
				return
			}
			r.c.logger.Warn("scheduler error", "err", err)
		case <-r.ctx.Done():
			return
		}
	}
}

// processItemGuarded is the scheduler's pipeline function: processItem on a
// callback runner (see guard), since item processors are user code.
func (r *run) processItemGuarded(ctx context.Context, it item) (out item, err error) {
	req := it.page.resp.Request
	req.running.Store(&labelItemPipeline)
	g, ok := r.guard(req, "item pipeline", func() { out, err = r.processItem(ctx, it) })
	switch {
	case !ok:
		return it, nil // the page is finished as stuck
	case g.exitErr != nil:
		r.finish(req, g.exitErr)
		return it, g.exitErr
	}
	return out, err
}

// abandon reports and finishes req, whose processing was cut short by err,
// the error of runtime.Goexit in a callback or of a panic that escaped
// (see goexitError). finish runs even if an OnError callback exits the
// goroutine.
func (r *run) abandon(req *Request, resp *Response, err error) {
	resp.err = err
	defer r.finish(req, err)
	r.c.markCallbacksFor(req, func() { r.c.handleOnError(resp, err) })
}

// finish records a request's outcome and counts it done. A request that
// failed in transit (or with a server error) loses its visited mark, so a
// later Visit may try again.
//
// A queue run's request cut short by Stop keeps its mark: its entry goes
// back to the queue and its next delivery holds the mark on.
func (r *run) finish(req *Request, err error) {
	if !req.finished.CompareAndSwap(false, true) {
		return // finished as stuck while its callback ran on (see guard)
	}
	notStarted := errors.Is(err, errNotStarted)
	stopped := notStarted || (r.ctx.Err() != nil && errors.Is(err, context.Canceled)) || r.endedByStdContext(req, err)
	switch {
	case notStarted && !r.queueMode:
		r.c.counts.notStarted.Add(1)
	case stopped && !notStarted && r.queueMode:
		r.cutShort.Add(1)
	}
	if err != nil && (retryableForget(req, err) || notStarted) && !(stopped && r.queueMode) {
		r.c.forgetVisited(req)
	}
	req.setFinal(req.attempt, err)
	if req.root != nil {
		req.root.setFinal(req.attempt, err)
	}
	r.front.finish(r.ctx, req, !stopped)
	r.settled()
}

// endedByStdContext reports whether err, a queue run's request's outcome,
// is the collector's StdlibContext ending: the page was not fetched, the
// run is stopping (RunQueue watches that context too), and its entry goes
// back to the queue like one cut short by Stop, rather than being
// acknowledged as done.
func (r *run) endedByStdContext(req *Request, err error) bool {
	if !r.queueMode || err == nil {
		return false
	}
	cerr := req.stdContext().Err()
	return cerr != nil && errors.Is(err, cerr)
}

// dropUnstarted settles requests that an in-memory run, stopping, never
// sent: no OnError call hears of them (they did not fail), Stats.NotStarted
// counts them, their visited marks go so that a later crawl may fetch them,
// and a sync Visit waiting for one returns notStartedErr. A queue run's
// are released back to its queue by front.close and counted by
// countLeftInQueue.
func (r *run) dropUnstarted(reqs ...*Request) {
	if r.queueMode {
		return
	}
	for _, req := range reqs {
		if req == nil || !req.finished.CompareAndSwap(false, true) {
			continue
		}
		r.c.counts.notStarted.Add(1)
		r.c.forgetVisited(req)
		err := notStartedErr(req)
		req.setFinal(req.attempt, err)
		if req.root != nil {
			req.root.setFinal(req.attempt, err)
		}
	}
}

// countLeftInQueue adds to Stats.NotStarted the entries a stopped queue run
// left in q (storage.QueueLen.Total, its own releases included), less those
// whose fetch it cut short in flight, which OnError heard of. A storage
// that does not answer within queueStopGrace leaves the count as it is.
func (r *run) countLeftInQueue(q storage.Queue) {
	ctx, cancel := context.WithTimeout(context.Background(), queueStopGrace)
	defer cancel()
	l, err := q.Len(ctx)
	if err != nil {
		r.c.logger.Warn("counting the entries left in the queue", "err", err)
		return
	}
	if n := int64(l.Total()) - r.cutShort.Load(); n > 0 {
		r.c.counts.notStarted.Add(uint64(n))
	}
}

// waitRun blocks until r has nothing pending, then stops it (if no request
// arrived meanwhile), so that no goroutine of the run outlives the wait.
// When the StdlibContext ends first, it stops r as Stop would (see
// stopForContext).
func (c *Collector) waitRun(r *run) {
	if r.queueMode {
		<-r.stopped
		return
	}
	for {
		select {
		case <-r.front.idle():
		case <-r.cfg.stdCtx.Done():
			c.stopForContext(r)
			return
		case <-r.stopped:
			return
		}
		c.runMu.Lock()
		if c.run != r {
			c.runMu.Unlock()
			<-r.stopped
			return
		}
		if r.front.pending() > 0 {
			c.runMu.Unlock()
			continue
		}
		c.run = nil
		c.runMu.Unlock()
		r.shutdown()
		return
	}
}

// stopForContext stops r, whose StdlibContext ended, as Stop does: no
// request starts any more (reapAfter stopped the feed already), those in
// flight, failing with the context's error, get StopGrace to settle, and
// those never sent are dropped without an OnError call (see dropUnstarted),
// however long their hosts' Delay. Concurrent callers all return once r
// has stopped.
func (c *Collector) stopForContext(r *run) {
	c.runMu.Lock()
	r.aborted.Store(true) // links found meanwhile start no new crawl
	if c.run == r {
		c.run = nil
	}
	c.runMu.Unlock()
	r.drain(r.grace())
	r.shutdown()
}

// shutdown stops the run and waits for all its goroutines. Idempotent;
// concurrent callers all return after the run is fully stopped.
func (r *run) shutdown() {
	r.stopOnce.Do(func() {
		r.cancel()
		parked := r.gate.Close()
		r.wg.Wait()
		// A callback that has not returned a grace after the cancel is
		// abandoned, so that the workers, and Stop, do not wait for it.
		reaped, quit := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(reaped)
			t := time.NewTimer(r.grace())
			defer t.Stop()
			select {
			case <-t.C:
				r.reap()
			case <-quit:
			}
		}()
		// The scheduler may already be stopping itself, having seen r.ctx
		// end: Stop then refuses, but only once its workers have exited, so
		// every request they finish settles its queue entry before
		// front.close and none outlives the run.
		if err := r.sched.Stop(); err != nil {
			var te *scheduler.TransitionError
			if !errors.As(err, &te) || (te.From != scheduler.StatusStopping && te.From != scheduler.StatusStopped) {
				r.c.logger.Warn("stopping scheduler", "err", err)
			}
		}
		close(quit)
		<-reaped
		r.callsMu.Lock()
		r.reaping = true // leftovers' callbacks get a grace each
		r.callsMu.Unlock()
		if r.queueMode {
			r.analyzeLeftovers()
		}
		r.dropUnstarted(parked...)
		r.dropLeftovers()
		r.dropUnstarted(r.front.close()...)
		r.c.logger.Info("crawl stopped", "requests", r.c.requestCount.Load(), "responses", r.c.responseCount.Load())
		r.closeRunners()
		close(r.stopped)
	})
	<-r.stopped
}

// dropLeftovers drops (see dropUnstarted) the requests the scheduler held
// when it stopped, never downloaded, and those its download stage refused
// to start, not yet analyzed.
func (r *run) dropLeftovers() {
	left := r.sched.Leftovers()
	r.dropUnstarted(left.Requests...)
	for _, resp := range left.Responses {
		if resp != nil && errors.Is(resp.err, errNotStarted) {
			r.dropUnstarted(resp.Request)
		}
	}
}

// Wait blocks until the crawl is done: every admitted request, and every
// request its callbacks admitted, has been processed. Then the engine stops;
// a later Visit starts it again. Wait must not be called from a callback.
func (c *Collector) Wait() {
	for {
		c.runMu.Lock()
		r := c.run
		var stopping *run
		if len(c.stopping) > 0 {
			stopping = c.stopping[0]
		}
		c.runMu.Unlock()
		switch {
		case r != nil:
			c.waitRun(r)
		case stopping != nil:
			<-stopping.stopped
			c.runMu.Lock()
			c.stopping = slices.DeleteFunc(c.stopping, func(s *run) bool { return s == stopping })
			c.runMu.Unlock()
		default:
			return
		}
	}
}

// Stop ends the current crawl (not in Colly): no request starts any more;
// downloads in flight get StopGrace (1 s by default) to be answered and
// their callbacks to run, then the rest is cancelled; requests waiting in
// the frontier are dropped without an OnError call and counted in
// Stats.NotStarted (RunQueue releases them back to its queue); and
// Wait, Visit and RunQueue return. Once Stop has returned, no request of the
// crawl is sent. The collector stays usable; a later Visit starts a new
// crawl.
//
// Stop returns once the crawl has stopped, within about twice StopGrace
// whatever the callbacks do: a callback still running StopGrace after the
// cancel is abandoned (its goroutine stays blocked in user code; everything
// else of the crawl has exited), and Stop returns a *CallbackStuckError for
// each (errors.Is ErrCallbackStuck); otherwise nil. Called from one of the
// crawl's own callbacks, which the crawl would wait for, Stop returns nil at
// once and Wait waits.
func (c *Collector) Stop() error {
	c.runMu.Lock()
	r := c.run
	c.run = nil
	if r == nil {
		c.runMu.Unlock()
		return nil
	}
	r.aborted.Store(true)
	if !c.callingFromCallback() {
		c.runMu.Unlock()
		r.drain(r.grace())
		r.shutdown()
		return errors.Join(r.stuckErrors()...)
	}
	c.stopping = append(c.stopping, r)
	c.runMu.Unlock()
	r.cancel()
	// Owned by the run: Wait, Visit and RunQueue wait for r.stopped.
	go func() {
		r.shutdown()
		c.runMu.Lock()
		c.stopping = slices.DeleteFunc(c.stopping, func(s *run) bool { return s == r })
		c.runMu.Unlock()
	}()
	return nil
}

// queueStopGrace is how long a stopping queue run gives its storage for
// the last acknowledgements, and as long again for the releases of the
// entries it leased and did not finish (see queueFrontier.close); entries a
// failing storage does not take back in time return when their leases
// expire. (How long work in progress gets is StopGrace.)
const queueStopGrace = time.Second

// ErrRunning is returned by RunQueue when the collector is already crawling.
var ErrRunning = errors.New("collector is already running a crawl")

// RunQueue crawls with q as the frontier; it is the hook queue.Queue.Run
// uses. Requests admitted by callbacks are marshalled and pushed to q;
// entries are leased, run with threads download workers, and acknowledged
// when finished. Entries pushed without admission (queue.AddURL) are
// admitted when leased, so filters, robots.txt, the visited check and
// MaxRequests apply to them exactly. RunQueue returns when q has no entries
// left and nothing is in flight (whether or not the collector is Async), when
// ctx is done, or on Stop. When ctx is done no further request starts, and
// downloads in progress get up to StopGrace (a second by default) to finish
// (their callbacks run); then, as at Stop, the rest is cancelled and entries
// leased and not finished are released back to q; a callback still running
// StopGrace later is abandoned and its *CallbackStuckError joins the
// error. Each released entry keeps its admission, so it is not refused as
// visited when it comes back; its next delivery counts as one more attempt
// for the retry policy. A retry (RetryPolicy, BusyRetries) waits in q too:
// its entry is released with a not-before time, so it holds no worker,
// survives a crash and keeps its place.
//
// MaxRequests ends the run, not the queue: once the budget is spent no
// more entries are leased, the requests in flight finish, and RunQueue
// returns nil with the entries it did not fetch still in q, unacknowledged,
// for a later run.
//
// A failing storage (Redis down or restarting) pauses the crawl rather than
// losing work: each failed operation (push, lease, ack, release, len, the
// visited set) is retried with jittered backoff growing to 5 s, until it
// succeeds or the run stops. OnError gets one *StorageError
// (errors.Is ErrStorageUnavailable) per kind of operation when an outage
// begins, the logger a Warn per retry and an Info on recovery. A link that
// cannot be stored before the run stops makes its parent's entry released
// instead of acknowledged, so the parent is fetched again later and finds it
// again. An outage does not end the run: RunQueue returns nil once the
// storage is back and the queue is drained. A storage that cannot be
// used again ends it at once with an error saying so: one that lost the
// crawl's contents (errors.Is storage.ErrStoreReset: a Redis restarted
// without persistence) or one that is damaged, read-only or cannot be
// opened (errors.Is storage.ErrStoreUnusable).
//
// The error joins ctx's error, those storage errors, and one error per
// undecodable entry (each acknowledged and dropped, errors.Is
// ErrUndecodableRequest). Failed requests go to OnError, not here.
func (c *Collector) RunQueue(ctx context.Context, q storage.Queue, threads int) error {
	if threads <= 0 {
		threads = 1
	}
	cfg := c.snapshot()
	qf := newQueueFrontier(c, cfg, q, threads)
	c.runMu.Lock()
	if c.run != nil {
		c.runMu.Unlock()
		return ErrRunning
	}
	r, err := c.startRun(cfg, qf, threads, true)
	if err != nil {
		c.runMu.Unlock()
		return err
	}
	c.run = r
	c.runMu.Unlock()
	qf.attachAdds(ctx)
	// The StdlibContext ending fails every fetch from then on: the run
	// stops as for its own context, rather than lease every entry left
	// only to fail it.
	std := cfg.stdCtx.Done()
	stopped := true
	select {
	case <-r.drained:
		stopped = false
	case <-ctx.Done():
		r.drain(r.grace())
	case <-std:
		r.drain(r.grace())
	case <-r.stopped:
	}
	c.runMu.Lock()
	if c.run == r {
		c.run = nil
	}
	c.runMu.Unlock()
	r.shutdown()
	if stopped {
		r.countLeftInQueue(q)
	}
	errs := append(qf.errors(), r.stuckErrors()...)
	if err := ctx.Err(); err != nil {
		errs = append([]error{err}, errs...)
	} else if err := cfg.stdCtx.Err(); err != nil {
		errs = append([]error{fmt.Errorf("the collector's StdlibContext ended: %w", err)}, errs...)
	}
	return errors.Join(errs...)
}
