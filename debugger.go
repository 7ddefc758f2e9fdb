package magpie

import (
	"strconv"

	"github.com/magpiecrawl/magpie/debug"
)

// debuggerRef boxes the interface for atomic.Pointer.
type debuggerRef struct{ d debug.Debugger }

// Debugger attaches d to the collector, as SetDebugger does.
func Debugger(d debug.Debugger) CollectorOption {
	return func(c *Collector) { c.SetDebugger(d) }
}

// SetDebugger calls d.Init and, if it succeeds, sends d the collector's
// events from then on (a nil d detaches the current one). An Init error is
// logged and leaves the previous debugger in place. Clones made afterwards
// share the debugger. Safe for concurrent use, also during a crawl.
func (c *Collector) SetDebugger(d debug.Debugger) {
	if d == nil {
		c.debugger.Store(nil)
		return
	}
	if err := d.Init(); err != nil {
		c.logger.Error("debugger init failed", "err", err)
		return
	}
	c.debugger.Store(&debuggerRef{d})
}

// debugging reports whether a debugger is attached; callers check it before
// building an event's values, which costs allocations.
func (c *Collector) debugging() bool { return c.debugger.Load() != nil }

// emit sends one event to the attached debugger, if any.
func (c *Collector) emit(typ string, req *Request, values map[string]string) {
	d := c.debugger.Load()
	if d == nil {
		return
	}
	e := &debug.Event{Type: typ, CollectorID: c.ID, Values: values}
	if req != nil {
		e.RequestID = req.ID
	}
	d.d.Event(e)
}

// requestValues are the values of request events.
func requestValues(req *Request) map[string]string {
	return map[string]string{"url": logURL(req), "method": req.Method, "depth": strconv.Itoa(req.Depth)}
}

// responseValues are the values of response and error events.
func responseValues(resp *Response, err error) map[string]string {
	v := map[string]string{"url": logURL(resp.Request)}
	if resp.StatusCode != 0 {
		v["status"] = strconv.Itoa(resp.StatusCode)
	}
	if err != nil {
		v["error"] = err.Error()
	}
	return v
}

// Event types under short names, so that the files that emit events need not
// import the debug package (callbacks.go imports runtime/debug).
const (
	evRequest         = debug.EventRequest
	evRequestHeaders  = debug.EventRequestHeaders
	evResponseHeaders = debug.EventResponseHeaders
	evResponse        = debug.EventResponse
	evHTML            = debug.EventHTML
	evXML             = debug.EventXML
	evError           = debug.EventError
	evScraped         = debug.EventScraped
	evFetch           = debug.EventFetch
)

// logURL is r's URL as logs, debugger events and error texts show it: a
// password in it reads "xxxxx" (url.URL.Redacted), since a start URL may
// carry user:password and every link resolved against it inherits them.
func logURL(r *Request) string {
	if r == nil || r.URL == nil {
		return ""
	}
	return r.URL.Redacted()
}
