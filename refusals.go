package magpie

import (
	"errors"
	"sync/atomic"
)

// RefusedCallback is called with a request that was refused before it was
// sent (domain, URL filter, depth, robots.txt, already visited, MaxRequests,
// MaxRequestsPerHost, scheme, invalid URL, full queue, stopped crawl,
// blocked host, priority out of range) and the typed error that says why; Visit returns the same
// error.
type RefusedCallback func(*Request, error)

// OnRefused registers f for requests refused before they were sent. OnError
// is only for requests that were attempted and failed, as in Colly, so that
// a crawl's error log is not flooded by links to pages already crawled.
func (c *Collector) OnRefused(f RefusedCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.refused = append(cb.refused, f) })
}

// Refusal reasons, the keys of Stats.Refused.
const (
	RefusedDomain            = "domain"
	RefusedURLFilter         = "url_filter"
	RefusedDepth             = "depth"
	RefusedRobots            = "robots"
	RefusedRobotsUnavailable = "robots_unavailable"
	RefusedVisited           = "visited"
	RefusedMaxRequests       = "max_requests"
	RefusedHostBudget        = "host_budget"
	RefusedScheme            = "scheme"
	RefusedInvalidURL        = "invalid_url"
	RefusedQueueFull         = "queue_full"
	RefusedFrontierFull      = "frontier_full"
	RefusedStopped           = "stopped"
	RefusedPrivateNetwork    = "private_network"
	RefusedSitemapNesting    = "sitemap_nesting"
	RefusedSitemapScope      = "sitemap_scope"
	RefusedBlocked           = "blocked"
	RefusedPriority          = "priority"
)

// refusalReasons maps each refusal sentinel to its reason, in the order
// they are tested.
var refusalReasons = []struct {
	err    error
	reason string
}{
	{ErrPrivateNetwork, RefusedPrivateNetwork},
	{ErrForbiddenDomain, RefusedDomain},
	{ErrForbiddenURL, RefusedURLFilter},
	{ErrNoURLFiltersMatch, RefusedURLFilter},
	{ErrMaxDepth, RefusedDepth},
	{ErrRobotsTxtBlocked, RefusedRobots},
	{ErrRobotsTxtUnavailable, RefusedRobotsUnavailable},
	{ErrMaxRequests, RefusedMaxRequests},
	{ErrMaxRequestsPerHost, RefusedHostBudget},
	{ErrUnsupportedScheme, RefusedScheme},
	{ErrInvalidURL, RefusedInvalidURL},
	{ErrMissingURL, RefusedInvalidURL},
	{ErrQueueFull, RefusedQueueFull},
	{ErrFrontierFull, RefusedFrontierFull},
	{ErrStopped, RefusedStopped},
	{ErrSitemapNesting, RefusedSitemapNesting},
	{ErrSitemapOutOfScope, RefusedSitemapScope},
	{ErrHostBlocked, RefusedBlocked},
	{ErrPriorityRange, RefusedPriority},
}

// refusalReason names the refusal err is, or returns "" for an error that is
// a failure (storage, context), which goes to OnError.
func refusalReason(err error) string {
	if errors.Is(err, ErrNotDue) {
		return RefusedNotDue
	}
	if _, ok := errors.AsType[*AlreadyVisitedError](err); ok {
		return RefusedVisited
	}
	if _, ok := errors.AsType[*StorageError](err); ok {
		return ""
	}
	for _, r := range refusalReasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return ""
}

// refusalCounts counts refusals by reason, and fragment-only links.
type refusalCounts struct {
	byReason  [len(refusalKeys)]atomic.Uint64
	fragments atomic.Uint64
}

// refusalKeys are the reasons in Stats order.
var refusalKeys = [...]string{RefusedDomain, RefusedURLFilter, RefusedDepth, RefusedRobots, RefusedRobotsUnavailable,
	RefusedVisited, RefusedMaxRequests, RefusedScheme, RefusedInvalidURL, RefusedQueueFull, RefusedStopped, RefusedPrivateNetwork, RefusedFrontierFull,
	RefusedSitemapNesting, RefusedSitemapScope, RefusedNotDue, RefusedHostBudget, RefusedBlocked,
	RefusedPriority}

func (rc *refusalCounts) add(reason string) {
	for i, k := range refusalKeys {
		if k == reason {
			rc.byReason[i].Add(1)
			return
		}
	}
}

// snapshot returns the non-zero counts.
func (rc *refusalCounts) snapshot() map[string]uint64 {
	m := map[string]uint64{}
	for i, k := range refusalKeys {
		if n := rc.byReason[i].Load(); n > 0 {
			m[k] = n
		}
	}
	return m
}

// deliverRefusal delivers an error that kept req from being queued: a
// refusal goes to OnRefused and is counted; anything else (a storage
// failure) to OnError. The caller marks the goroutine as running callbacks
// where that matters. Callers go through refuse or refuseMarked, which log
// it first, except a refusal met in the download stage (refusedInFetch),
// logged where it was met.
func (c *Collector) deliverRefusal(req *Request, err error) {
	err = c.recrawlRefusal(req, err)
	reason := refusalReason(err)
	if reason == "" {
		c.handleOnError(&Response{Request: req, Ctx: req.Ctx}, err)
		return
	}
	c.refusals.add(reason)
	cbs := c.snapshotCallbacks()
	for _, f := range cbs.refused {
		if perr := c.safelyFor(req, "OnRefused", func() { f(req, err) }); perr != nil {
			c.logger.Error("OnRefused callback panicked", "url", logURL(req), "err", perr)
		}
	}
}

// refuse is the door every refusal goes through: it logs err and delivers
// it to OnRefused (a failure such as a storage error to OnError); in sync
// mode the callbacks run marked as callbacks, so that a Visit from them does
// not wait for the crawl. refuseMarked is the same door for a caller whose
// goroutine is marked already, or needs no mark.
func (c *Collector) refuse(req *Request, err error) {
	c.logRefusal(req, err)
	if c.config().async {
		c.deliverRefusal(req, err)
		return
	}
	c.withTokenOn(req, func() { c.deliverRefusal(req, err) })
}

// refuseMarked is refuse without the callback mark: the caller's goroutine
// already has it (a callback, a sync Visit that set it), or the crawl is
// Async, where nothing waits.
func (c *Collector) refuseMarked(req *Request, err error) {
	c.logRefusal(req, err)
	c.deliverRefusal(req, err)
}

func (c *Collector) logRefusal(req *Request, err error) {
	if !c.debugEnabled() {
		return
	}
	c.logger.Debug("request refused", "url", req.URL.Redacted(), "method", req.Method, "depth", req.Depth, "request_id", req.ID, "err", err)
}
