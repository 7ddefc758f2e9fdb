package magpie

import (
	"fmt"
	"runtime/debug"

	"github.com/magpiecrawl/magpie/storage"
)

// Priority: which waiting request goes first. A request's Priority is
// decided once, when it is admitted (admit calls decidePriority): the crawl
// order's depth term, then the Prioritize hook. The frontier then hands
// requests out highest priority first (frontier.go).

// crawlOrder is the depth term BreadthFirst and DepthFirst add to a
// request's priority when it is admitted.
type crawlOrder uint8

const (
	// orderNone adds nothing: requests of equal priority go in the order
	// they came, which for links found page after page is breadth-first
	// within a host.
	orderNone crawlOrder = iota
	// orderBreadth subtracts the depth: shallower first.
	orderBreadth
	// orderDepth adds the depth: deeper first.
	orderDepth
)

// Prioritize sets a hook that decides the priority of every request the
// collector admits: top-level Visits, links found by callbacks, retries
// sent with Request.Retry excepted (a retry keeps its request's
// priority). f gets the request as admission has checked it, its Priority
// already including the crawl order's term (see BreadthFirst), and
// returns the priority it is to wait with (higher first); so a program
// can rank links it did not build, by URL pattern say:
//
//	magpie.Prioritize(func(r *magpie.Request) int {
//		if strings.HasPrefix(r.URL.Path, "/docs/") {
//			return r.Priority + 10
//		}
//		return r.Priority
//	})
//
// f runs once per request, on the goroutine that admits it (a callback's,
// or the caller of Visit), so with Async or ConcurrentCallbacks it is
// called from several goroutines at once and must be safe for that. It must
// not call Visit. A result outside the int32 range refuses the request
// with an error wrapping ErrPriorityRange (OnRefused,
// Stats().Refused["priority"]); a panic in f refuses it too, reaching
// OnError as a *CallbackPanicError. In a queue run the priority is decided
// when a link is pushed: an entry leased from the storage keeps the
// priority it was stored with, and entries added with queue.AddURL before
// the run carry the Request's own. nil removes the hook.
func Prioritize(f func(*Request) int) CollectorOption {
	return func(c *Collector) {
		c.prioritize = nil
		if f != nil {
			c.prioritize = &f
		}
	}
}

// BreadthFirst makes the crawl take shallower requests first: admission
// subtracts a request's Depth from its Priority, as Scrapy's
// DEPTH_PRIORITY = 1 does, before the Prioritize hook (which sees the
// result). Without it (and without DepthFirst), requests of equal priority
// go in the order they were found. The last of BreadthFirst and DepthFirst
// given wins.
func BreadthFirst() CollectorOption {
	return func(c *Collector) { c.order = orderBreadth }
}

// DepthFirst makes the crawl take deeper requests first: admission adds a
// request's Depth to its Priority (Scrapy's DEPTH_PRIORITY = -1), before
// the Prioritize hook (which sees the result). The last of BreadthFirst
// and DepthFirst given wins.
func DepthFirst() CollectorOption {
	return func(c *Collector) { c.order = orderDepth }
}

// ranked reports whether the crawl ranks its requests from the start (an
// order or a hook is set), so that the in-memory frontier holds them back
// from the gate (memFrontier.ranked) before the first ranked one comes.
func (cfg *config) ranked() bool { return cfg.order != orderNone || cfg.prioritize != nil }

// decidePriority decides req's Priority as it is admitted: its own, plus the
// crawl order's depth term, then the Prioritize hook's answer. It runs
// once per request: a retry copy, and an entry admitted on its lease, keep
// the priority they carry. The result must fit in an int32, which every
// store can keep.
func (c *Collector) decidePriority(cfg *config, req *Request) error {
	if req.prioritized || req.entry.onLease {
		return nil
	}
	if err := storage.CheckPriority(req.Priority); err != nil {
		return fmt.Errorf("%w: Priority %d of %s", err, req.Priority, req.URL.Redacted())
	}
	switch cfg.order {
	case orderBreadth:
		req.Priority -= req.Depth
	case orderDepth:
		req.Priority += req.Depth
	}
	if cfg.prioritize != nil {
		p, err := c.runPrioritize(*cfg.prioritize, req)
		if err != nil {
			return err
		}
		if err := storage.CheckPriority(p); err != nil {
			return fmt.Errorf("%w: Prioritize gave %d for %s", err, p, req.URL.Redacted())
		}
		req.Priority = p
	} else if err := storage.CheckPriority(req.Priority); err != nil {
		return fmt.Errorf("%w: Priority %d of %s at depth %d", err, req.Priority, req.URL.Redacted(), req.Depth)
	}
	req.prioritized = true
	return nil
}

// runPrioritize calls the hook f for req; a panic becomes an error, as in
// any callback, so that one bad request does not end the crawl.
func (c *Collector) runPrioritize(f func(*Request) int, req *Request) (p int, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &CallbackPanicError{Callback: "Prioritize", Value: v, Stack: debug.Stack()}
		}
	}()
	return f(req), nil
}
