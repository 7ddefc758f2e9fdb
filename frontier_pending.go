package magpie

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
)

// A pending URL costs bytes, not kilobytes. The in-memory frontier of a
// broad crawl holds far more requests than are in flight, and nearly all of
// them are links a callback found with Request.Visit: a GET at some depth
// with its page's headers, user agent and run. Such a link waits as a
// pendingReq (its URL as a string, depth, ID, visited key, Context and a
// pointer to what the page's links share) and becomes a Request again when
// it leaves the frontier. Anything else (a retry, a request a caller waits
// on, a POST, a sitemap, a request with a body or its own Host) waits as
// itself.

// pendingReq is one request waiting in the in-memory frontier: compact when
// full is nil, else full is the request. It takes 64 bytes: the depth is
// kept in 16 bits, so that the priority fits beside it (a link deeper than
// 32,767 waits as itself).
type pendingReq struct {
	full   *Request
	origin *pendingOrigin
	ctx    *Context
	url    string
	key    uint64
	id     uint32
	// seq is the frontier's arrival number (see memFrontier.enqueue).
	seq uint32
	// prio is the request's Priority, which admission keeps in the int32
	// range; for a full entry too, so that ordering never dereferences.
	prio  int32
	depth int16
	flags pendingFlags
}

// first reports whether p leaves the frontier before o: the higher
// priority, then the earlier arrival.
func (p *pendingReq) first(o *pendingReq) bool {
	if p.prio != o.prio {
		return p.prio > o.prio
	}
	return before(p.seq, o.seq)
}

// prio32 is a Priority as a pendingReq keeps it; admission refuses one
// outside the int32 range, which is clamped here only to stay defined.
func prio32(p int) int32 {
	return int32(min(max(p, math.MinInt32), math.MaxInt32))
}

// pendingFlags are a compact pendingReq's booleans.
type pendingFlags uint8

const (
	// pendingCheckRevisit is Request.checkRevisit.
	pendingCheckRevisit pendingFlags = 1 << iota
	// pendingMarked is Request.marked: the request holds a visited mark.
	pendingMarked
)

// pendingOrigin is what the compact links of one page share: every field of
// their Requests that is the same for all of them. The frontier keeps the
// last few it made (see memFrontier.originFor) and shares one among the
// links that match it, so it costs once per page, not once per link.
type pendingOrigin struct {
	collector *Collector
	stdCtx    context.Context
	parentRun *run
	parentURL string
	robotsUA  string
	// headers equals the Headers of every request that refers to it; each
	// request gets a clone, as newRequest gives each its own.
	headers http.Header
}

// originCache is how many recent origins the frontier compares a link
// with: the pages being analysed at once, roughly.
const originCache = 4

// compactable reports whether req can wait as a compact pendingReq: a link
// made by a callback (nobody else holds it once queued), a plain first try
// of a GET, with nothing set that a compact entry does not keep.
func compactable(req *Request) bool {
	return req.pendingLink && req.Method == http.MethodGet && req.attempt == 1 &&
		req.Body == nil && req.bodyBytes == nil && req.Host == "" && req.Headers != nil &&
		req.ResponseCharacterEncoding == "" && req.ProxyURL == "" && req.baseURL == nil &&
		!req.abort.Load() && req.err == nil && req.redirectKeys == nil && req.ticket == nil &&
		req.notBefore.IsZero() && req.robotsWait.IsZero() && !req.sitemap && req.sitemapLevel == 0 &&
		req.sitemapFor == "" && req.running.Load() == nil && !req.finished.Load() &&
		req.run == nil && req.root == nil && req.entry.zero() &&
		req.Depth >= math.MinInt16 && req.Depth <= math.MaxInt16 &&
		comparableCtx(req.stdCtx) && compactURL(req.URL)
}

// comparableCtx reports whether ctx can be compared with == without a
// panic (a context is nearly always a pointer).
func comparableCtx(ctx context.Context) bool {
	return ctx == nil || reflect.TypeOf(ctx).Comparable()
}

// compactURL reports whether url.Parse(u.String()) gives u back: an
// absolute hierarchical URL with a host, no user info and no fragment
// (links drop theirs), whose scheme is lower case, as url.Parse makes it.
func compactURL(u *url.URL) bool {
	if u == nil || u.Host == "" || u.Opaque != "" || u.User != nil || u.ForceQuery || u.OmitHost ||
		u.Fragment != "" || u.RawFragment != "" || u.Scheme == "" {
		return false
	}
	if u.Path != "" && u.Path[0] != '/' {
		return false
	}
	for i := range len(u.Scheme) {
		if b := u.Scheme[i]; b >= 'A' && b <= 'Z' {
			return false
		}
	}
	// A RawPath that is not the path's own escaping is dropped by String.
	return u.RawPath == "" || u.EscapedPath() == u.RawPath
}

// compact returns the entry req waits as; origins are the frontier's recent
// origins, which it may extend.
func (f *memFrontier) compact(req *Request) pendingReq {
	if !compactable(req) {
		return pendingReq{full: req, prio: prio32(req.Priority)}
	}
	p := pendingReq{
		origin: f.originFor(req),
		ctx:    req.Ctx,
		url:    req.URL.String(),
		key:    req.visitKey,
		id:     req.ID,
		prio:   prio32(req.Priority),
		depth:  int16(req.Depth),
	}
	if req.checkRevisit {
		p.flags |= pendingCheckRevisit
	}
	if req.marked {
		p.flags |= pendingMarked
	}
	return p
}

// originFor returns a recent origin that matches req, or makes one; f.mu
// is held.
func (f *memFrontier) originFor(req *Request) *pendingOrigin {
	for _, o := range f.origins {
		if o != nil && o.collector == req.collector && o.stdCtx == req.stdCtx &&
			o.parentRun == req.parentRun && o.parentURL == req.parentURL &&
			o.robotsUA == req.robotsUA && sameHeader(o.headers, *req.Headers) {
			return o
		}
	}
	o := &pendingOrigin{
		collector: req.collector, stdCtx: req.stdCtx, parentRun: req.parentRun,
		parentURL: req.parentURL, robotsUA: req.robotsUA, headers: *req.Headers,
	}
	copy(f.origins[1:], f.origins[:len(f.origins)-1])
	f.origins[0] = o
	return o
}

// sameHeader reports whether a and b hold the same values in the same order.
func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !slices.Equal(av, bv) {
			return false
		}
	}
	return true
}

// request returns the Request p stands for.
func (p *pendingReq) request() *Request {
	if p.full != nil {
		return p.full
	}
	o := p.origin
	u, err := url.Parse(p.url)
	if err != nil {
		// compactURL admits only URLs that print and parse back; keep
		// the text so that the fetch fails with it rather than panics.
		u = &url.URL{Path: p.url}
	}
	h := o.headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	r := &Request{
		URL:       u,
		Method:    http.MethodGet,
		Headers:   &h,
		Ctx:       p.ctx,
		Depth:     int(p.depth),
		Priority:  int(p.prio),
		ID:        p.id,
		collector: o.collector,
		stdCtx:    o.stdCtx,
		parentURL: o.parentURL,
	}
	r.parentRun = o.parentRun
	r.attempt = 1
	r.prioritized = true
	r.flightVisit = flightVisit{
		visitKey:     p.key,
		checkRevisit: p.flags&pendingCheckRevisit != 0,
		marked:       p.flags&pendingMarked != 0,
	}
	r.robotsUA = o.robotsUA
	return r
}

// zero reports whether e is a queue entry of an in-memory crawl: all zero.
func (e *queueEntry) zero() bool {
	return e.leaseID == "" && !e.redelivered && !e.ownsMark && !e.deferMark && !e.admitted &&
		e.parent == nil && !e.lostChild.Load() && e.links == nil && !e.batchLinks.Load() &&
		e.premark == 0 && e.aheadHost == ""
}
