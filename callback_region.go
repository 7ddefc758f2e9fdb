package magpie

// markCallbacksFor is markCallbacks for the callbacks of req: the one
// goroutine-ID lookup of the region is kept in req.regionGID, where the
// sync-mode turn (serialCallbacks.enter) of each callback of req, and of the
// refusals of the requests its callbacks make (Request.Visit and kin), finds
// it instead of reading runtime.Stack once per callback.
func (c *Collector) markCallbacksFor(req *Request, f func()) {
	id := goroutineID()
	req.regionGID.Store(id)
	defer req.regionGID.Store(0)
	c.withCallbackMarkID(id, f)
}

// goroutine returns the ID of the goroutine running r's callbacks, which
// is the caller's when the caller runs one of them or a refusal they
// caused; without r, or outside its callbacks, it looks the ID up.
func (r *Request) goroutine() uint64 {
	if r != nil {
		if id := r.regionGID.Load(); id != 0 {
			return id
		}
	}
	return goroutineID()
}
