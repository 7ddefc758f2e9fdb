package scheduler

import "fmt"

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
		r.guard(r.downloadLoop, true, func() { r.download(req) })
	}
}

// guard runs one job of a worker. A job that never returns because its
// goroutine was ended by runtime.Goexit (user code in a module may call it,
// as t.FailNow does) would strand its pending unit and shrink the pool:
// guard releases the unit when the job had not (release) and starts a
// replacement worker running loop, unless the run is stopping. Panics are
// recovered further down, where the job can still report them.
func (r *run[Req, Resp, Item]) guard(loop func(), release bool, job func()) {
	returned := false
	defer func() {
		if returned {
			return
		}
		r.stats.panics.Add(1)
		if release {
			r.pending.add(-1)
		}
		if !r.stopping.Load() {
			r.wg.Add(1) // this goroutine's own count is still held
			go loop()
		}
	}()
	job()
	returned = true
}

// download fetches one request and hands its response on. The request's
// pending unit passes to the response, or is released on failure.
func (r *run[Req, Resp, Item]) download(req Req) {
	m, err := r.reg.Get(TypeDownloader)
	if err != nil {
		r.stats.requestsFailed.Add(1)
		r.report(StageSchedule, "", err)
		r.pending.add(-1)
		return
	}
	d, ok := m.(Downloader[Req, Resp])
	if !ok {
		r.stats.requestsFailed.Add(1)
		r.report(StageSchedule, m.ID(), fmt.Errorf("%w: %s is not a Downloader of this scheduler's types", ErrInvalidModule, m.ID()))
		r.pending.add(-1)
		return
	}
	resp, err := r.callDownload(d, req)
	if err != nil {
		if r.ctx.Err() != nil {
			r.stats.requestsCancelled.Add(1)
		} else {
			r.stats.requestsFailed.Add(1)
		}
		r.report(StageDownload, d.ID(), err)
		r.pending.add(-1)
		return
	}
	r.stats.requestsDownloaded.Add(1)
	if err := r.resps.Put(r.ctx, resp); err != nil {
		r.leaveResponses(resp)
		r.pending.add(-1)
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
		// analyze releases its unit in a deferred call, Goexit or not.
		r.guard(r.analyzeLoop, false, func() { r.analyze(resp) })
	}
}

// analyze runs one analyzer on a response; its items go to the item pool.
// They are counted before the response's unit is released.
func (r *run[Req, Resp, Item]) analyze(resp Resp) {
	defer r.pending.add(-1)
	r.stats.responsesAnalyzed.Add(1)
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
	r.pending.add(int64(len(items)))
	r.stats.itemsAccepted.Add(uint64(len(items)))
	for i, item := range items {
		if err := r.items.Put(r.ctx, item); err != nil {
			r.leaveItems(items[i:]...)
			r.pending.add(-int64(len(items) - i))
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
		r.guard(r.pipelineLoop, false, func() { r.process(item) })
	}
}

func (r *run[Req, Resp, Item]) process(item Item) {
	defer r.pending.add(-1)
	defer r.stats.itemsDone.Add(1)
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
