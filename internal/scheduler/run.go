package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/internal/buffer"
)

// run is everything one Init…Stop cycle owns. Init builds it whole; Start
// adds the context and goroutines; Stop tears it down. A new Init makes a new
// run, so a stopped run's leftovers stay readable.
type run[Req, Resp, Item any] struct {
	da  DataArgs
	reg *Registrar

	reqs  *buffer.Pool[Req]
	resps *buffer.Pool[Resp]
	items *buffer.Pool[Item]

	errs       chan error
	errMu      sync.RWMutex // guards errsClosed against sends racing the close
	errsClosed bool

	// Set by Start before the status becomes started, read after.
	ctx       context.Context
	cancel    context.CancelFunc
	stopAfter func() bool
	afterDone chan struct{} // closed when the context watcher has returned
	wg        sync.WaitGroup

	stopping atomic.Bool // set before cancel: workers hand back what they take
	// spawnMu orders starting an elastic worker (wg.Add) before shutdown's
	// wg.Wait: stopping is set under it.
	spawnMu sync.Mutex
	// dl and an count the download and analyze workers, for elastic stages.
	dl, an stage
	done   chan struct{} // closed once the run is stopped
	// shuttingDown is set by stop before it shuts the run down; a refused
	// Stop waits for done only then (a status set by other means has no
	// shutdown to wait for).
	shuttingDown atomic.Bool

	leftMu sync.Mutex // guards left
	left   Leftovers[Req, Resp, Item]

	afterMu sync.Mutex // guards afterFns and afterRan
	// afterFns are the AfterStop functions, run once the run is shut down.
	afterFns []func()
	afterRan bool
}

// Leftovers are the requests, responses and items a stopped run still held:
// queued in a pool, or in a worker's hands when
// the run was cancelled. They are handed back, never dropped silently.
type Leftovers[Req, Resp, Item any] struct {
	Requests  []Req
	Responses []Resp
	Items     []Item
}

func newRun[Req, Resp, Item any](da DataArgs) (*run[Req, Resp, Item], error) {
	r := &run[Req, Resp, Item]{
		da:        da,
		reg:       NewRegistrar(),
		errs:      make(chan error, da.ErrorBuffer),
		done:      make(chan struct{}),
		afterDone: make(chan struct{}),
	}
	var err error
	if r.reqs, err = buffer.NewPool[Req](da.Request.BufferCap, da.Request.MaxBufferNumber); err != nil {
		return nil, errors.Join(ErrInvalidArgs, err)
	}
	if r.resps, err = buffer.NewPool[Resp](da.Response.BufferCap, da.Response.MaxBufferNumber); err != nil {
		return nil, errors.Join(ErrInvalidArgs, err)
	}
	if r.items, err = buffer.NewPool[Item](da.Item.BufferCap, da.Item.MaxBufferNumber); err != nil {
		return nil, errors.Join(ErrInvalidArgs, err)
	}
	return r, nil
}

// stage counts the workers of one elastic stage.
type stage struct {
	running atomic.Int64 // workers started and not exited
	idle    atomic.Int64 // workers waiting for work
}

// start launches the worker pools (one worker per elastic stage, see
// DataArgs.WorkerIdle).
func (r *run[Req, Resp, Item]) start() {
	nd, na := r.da.DownloadWorkers, r.da.AnalyzeWorkers
	if r.da.WorkerIdle > 0 {
		nd, na = 1, 1
	}
	r.dl.running.Store(int64(nd))
	r.an.running.Store(int64(na))
	for range nd {
		r.wg.Add(1)
		go r.downloadLoop()
	}
	for range na {
		r.wg.Add(1)
		go r.analyzeLoop()
	}
	for range r.da.PipelineWorkers {
		r.wg.Add(1)
		go r.pipelineLoop()
	}
}

// shutdown cancels the run, waits for every goroutine it started, and
// collects what was left.
func (r *run[Req, Resp, Item]) shutdown() {
	r.spawnMu.Lock()
	r.stopping.Store(true)
	r.spawnMu.Unlock()
	r.cancel()
	r.wg.Wait()

	r.leaveRequests(r.reqs.Close()...)
	r.leaveResponses(r.resps.Close()...)
	r.leaveItems(r.items.Close()...)
}

// closeErrors closes the error channel: the last step of stopping, so that a
// caller who waits for it to close finds the run stopped.
func (r *run[Req, Resp, Item]) closeErrors() {
	r.errMu.Lock()
	r.errsClosed = true
	close(r.errs)
	r.errMu.Unlock()
}

func (r *run[Req, Resp, Item]) leaveRequests(v ...Req) {
	if len(v) == 0 {
		return
	}
	r.leftMu.Lock()
	r.left.Requests = append(r.left.Requests, v...)
	r.leftMu.Unlock()
}

func (r *run[Req, Resp, Item]) leaveResponses(v ...Resp) {
	if len(v) == 0 {
		return
	}
	r.leftMu.Lock()
	r.left.Responses = append(r.left.Responses, v...)
	r.leftMu.Unlock()
}

func (r *run[Req, Resp, Item]) leaveItems(v ...Item) {
	if len(v) == 0 {
		return
	}
	r.leftMu.Lock()
	r.left.Items = append(r.left.Items, v...)
	r.leftMu.Unlock()
}

// report sends a StageError to Errors() without ever blocking: when the
// channel is full (nobody reads it) the error is counted as dropped. Errors
// that are only the run's own cancellation are counted, not sent.
func (r *run[Req, Resp, Item]) report(stage, id string, err error) {
	if ctxErr := r.ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return
	}
	e := &StageError{Stage: stage, ModuleID: id, Err: err}
	r.errMu.RLock()
	if !r.errsClosed {
		select {
		case r.errs <- e:
		default:
		}
	}
	r.errMu.RUnlock()
}

// errRetire ends an elastic worker that found no work for WorkerIdle.
var errRetire = errors.New("idle worker retired")

// growDownload and growAnalyze start a worker for an elastic stage when
// work waits that the idle workers will not take all of.
func (r *run[Req, Resp, Item]) growDownload() {
	r.grow(&r.dl, r.reqs.Total(), r.da.DownloadWorkers, r.downloadLoop)
}
func (r *run[Req, Resp, Item]) growAnalyze() {
	r.grow(&r.an, r.resps.Total(), r.da.AnalyzeWorkers, r.analyzeLoop)
}

func (r *run[Req, Resp, Item]) grow(st *stage, waiting, most int, loop func()) {
	if r.da.WorkerIdle <= 0 || int64(waiting) <= st.idle.Load() || st.running.Load() >= int64(most) {
		return
	}
	r.spawnMu.Lock()
	defer r.spawnMu.Unlock()
	if r.stopping.Load() || st.running.Load() >= int64(most) {
		return
	}
	st.running.Add(1)
	r.wg.Add(1)
	go loop()
}

// take gets the next piece of work of a stage from p: at once if some
// waits, else it waits. An elastic stage's worker (idle > 0) waits at most
// idle and then retires (errRetire), unless it is the stage's last worker.
// Other errors are the pool's (closed) or ctx's, the run's context.
func take[T any](ctx context.Context, idle time.Duration, p *buffer.Pool[T], st *stage) (T, error) {
	v, ok, err := p.TryGet()
	if ok || err != nil {
		return v, err
	}
	if idle <= 0 {
		return p.Get(ctx)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, idle)
		st.idle.Add(1)
		v, err = p.Get(wctx)
		st.idle.Add(-1)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return v, err
		}
		if st.running.Add(-1) > 0 {
			return v, errRetire
		}
		st.running.Add(1) // the last worker stays
	}
}
