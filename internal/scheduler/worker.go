package scheduler

import (
	"errors"
	"fmt"
)

func (r *run[Req, Resp, Item]) downloadLoop() {
	defer r.wg.Done()
	for {
		req, err := take(r.ctx, r.da.WorkerIdle, r.reqs, &r.dl)
		if err != nil {
			return
		}
		if r.stopping.Load() {
			// Get may still succeed after cancel; what is taken then
			// stays queued work, handed back by Stop.
			r.leaveRequests(req)
			return
		}
		r.guardedDownload(req)
	}
}

// workerLoop names the loop of a worker, which replaceWorker starts again.
type workerLoop uint8

const (
	loopDownload workerLoop = iota
	loopAnalyze
	loopPipeline
)

// guardedDownload, guardedAnalyze and guardedProcess run one job of a
// worker. A job that never returns because its goroutine was ended by
// runtime.Goexit (user code in a module may call it, as t.FailNow does)
// would shrink the pool: replaceWorker then starts a replacement worker,
// unless the run is stopping. Panics are recovered further down, where the
// job can still report them. (One method per stage rather than a job
// closure: a closure and a method value would cost two allocations per
// request, response and item.)
func (r *run[Req, Resp, Item]) guardedDownload(req Req) {
	returned := false
	defer r.replaceWorker(loopDownload, &returned)
	r.download(req)
	returned = true
}

func (r *run[Req, Resp, Item]) guardedAnalyze(resp Resp) {
	returned := false
	defer r.replaceWorker(loopAnalyze, &returned)
	r.analyze(resp)
	returned = true
}

func (r *run[Req, Resp, Item]) guardedProcess(item Item) {
	returned := false
	defer r.replaceWorker(loopPipeline, &returned)
	r.process(item)
	returned = true
}

// replaceWorker starts a worker running loop in place of one whose job did
// not return (*returned false), unless the run is stopping.
func (r *run[Req, Resp, Item]) replaceWorker(loop workerLoop, returned *bool) {
	if *returned || r.stopping.Load() {
		return
	}
	r.wg.Add(1) // this goroutine's own count is still held
	switch loop {
	case loopDownload:
		go r.downloadLoop()
	case loopAnalyze:
		go r.analyzeLoop()
	default:
		go r.pipelineLoop()
	}
}

// download fetches one request and hands its response on.
func (r *run[Req, Resp, Item]) download(req Req) {
	m, err := r.reg.Get(TypeDownloader)
	if err != nil {
		r.report(StageSchedule, "", err)
		return
	}
	d, ok := m.(Downloader[Req, Resp])
	if !ok {
		r.report(StageSchedule, m.ID(), fmt.Errorf("%w: %s is not a Downloader of this scheduler's types", ErrInvalidModule, m.ID()))
		return
	}
	resp, err := r.callDownload(d, req)
	if err != nil {
		if _, ok := errors.AsType[*notBegunError](err); ok {
			// Stop cancelled the run between the take and the call: the
			// request was never sent, so it stays queued work.
			r.leaveRequests(req)
			return
		}
		r.report(StageDownload, d.ID(), err)
		return
	}
	if err := r.resps.Put(r.ctx, resp); err != nil {
		r.leaveResponses(resp)
		return
	}
	r.growAnalyze()
}

func (r *run[Req, Resp, Item]) callDownload(d Downloader[Req, Resp], req Req) (resp Resp, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	return d.Download(r.ctx, req)
}

func (r *run[Req, Resp, Item]) analyzeLoop() {
	defer r.wg.Done()
	for {
		resp, err := take(r.ctx, r.da.WorkerIdle, r.resps, &r.an)
		if err != nil {
			return
		}
		if r.stopping.Load() {
			r.leaveResponses(resp)
			return
		}
		r.guardedAnalyze(resp)
	}
}

// analyze runs one analyzer on a response; its items go to the item pool.
func (r *run[Req, Resp, Item]) analyze(resp Resp) {
	m, err := r.reg.Get(TypeAnalyzer)
	if err != nil {
		r.report(StageSchedule, "", err)
		return
	}
	a, ok := m.(Analyzer[Resp, Item])
	if !ok {
		r.report(StageSchedule, m.ID(), fmt.Errorf("%w: %s is not an Analyzer of this scheduler's types", ErrInvalidModule, m.ID()))
		return
	}
	items, errs := r.callAnalyze(a, resp)
	for _, err := range errs {
		if err != nil {
			r.report(StageAnalyze, a.ID(), err)
		}
	}
	for i, item := range items {
		if err := r.items.Put(r.ctx, item); err != nil {
			r.leaveItems(items[i:]...)
			return
		}
	}
}

func (r *run[Req, Resp, Item]) callAnalyze(a Analyzer[Resp, Item], resp Resp) (items []Item, errs []error) {
	defer func() {
		if v := recover(); v != nil {
			errs = append(errs, panicError(v))
		}
	}()
	return a.Analyze(r.ctx, resp)
}

func (r *run[Req, Resp, Item]) pipelineLoop() {
	defer r.wg.Done()
	for {
		item, err := r.items.Get(r.ctx)
		if err != nil {
			return
		}
		if r.stopping.Load() {
			r.leaveItems(item)
			return
		}
		r.guardedProcess(item)
	}
}

func (r *run[Req, Resp, Item]) process(item Item) {
	m, err := r.reg.Get(TypePipeline)
	if err != nil {
		r.report(StageSchedule, "", err)
		return
	}
	p, ok := m.(Pipeline[Item])
	if !ok {
		r.report(StageSchedule, m.ID(), fmt.Errorf("%w: %s is not a Pipeline of this scheduler's item type", ErrInvalidModule, m.ID()))
		return
	}
	for _, err := range r.callSend(p, item) {
		if err != nil {
			r.report(StagePipeline, p.ID(), err)
		}
	}
}

func (r *run[Req, Resp, Item]) callSend(p Pipeline[Item], item Item) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			errs = append(errs, panicError(v))
		}
	}()
	return p.Send(r.ctx, item)
}
