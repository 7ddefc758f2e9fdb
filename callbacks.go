package magpie

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xpath"
)

// RequestCallback is called with a request before it is sent (OnRequest) or
// just before its headers go out (OnRequestHeaders).
type RequestCallback func(*Request)

// ResponseHeadersCallback is called when the status and headers have arrived.
type ResponseHeadersCallback func(*Response)

// ResponseCallback is called with a complete response.
type ResponseCallback func(*Response)

// HTMLCallback is called for each element an OnHTML selector matches.
type HTMLCallback func(*HTMLElement)

// XMLCallback is called for each node an OnXML expression matches.
type XMLCallback func(*XMLElement)

// ErrorCallback is called with every request that was sent and failed, or
// whose callbacks failed; requests refused before any fetch go to OnRefused.
type ErrorCallback func(*Response, error)

// ScrapedCallback is called after the OnHTML and OnXML callbacks of a response.
type ScrapedCallback func(*Response)

type htmlCallback struct {
	selector string
	// label names it in a CallbackStuckError.
	label   callbackLabel
	matcher cascadia.Selector
	fn      HTMLCallback
	// detached is set by OnHTMLDetach; the entry is purged after the current response.
	detached atomic.Bool
}

type xmlCallback struct {
	query    string
	label    callbackLabel
	expr     *xpath.Expr
	fn       XMLCallback
	detached atomic.Bool
}

// callbacks are a collector's registered callbacks, in registration order.
type callbacks struct {
	request         []RequestCallback
	requestHeaders  []RequestCallback
	responseHeaders []ResponseHeadersCallback
	response        []ResponseCallback
	html            []*htmlCallback
	xml             []*xmlCallback
	err             []ErrorCallback
	refused         []RefusedCallback
	scraped         []ScrapedCallback
	// streamTags are the tag names the OnHTML selectors name when every
	// one of them can be matched from a start tag alone (StreamHTML); nil
	// otherwise.
	streamTags []string
}

type callbackCounts struct{ request, html, response, err int }

func (cb *callbacks) count() callbackCounts {
	return callbackCounts{len(cb.request), len(cb.html), len(cb.response), len(cb.err)}
}

// OnRequest registers f to run before each request is sent. Request.Abort in
// f drops the request silently.
func (c *Collector) OnRequest(f RequestCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.request = append(cb.request, f) })
}

// OnRequestHeaders registers f to run just before the request goes out,
// after the cache was consulted. Request.Abort in f fails the request with
// ErrAbortedBeforeRequest.
func (c *Collector) OnRequestHeaders(f RequestCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.requestHeaders = append(cb.requestHeaders, f) })
}

// OnResponseHeaders registers f to run when status and headers have arrived,
// before the body is read. Request.Abort in f fails the request with
// ErrAbortedAfterHeaders and the body is never read.
func (c *Collector) OnResponseHeaders(f ResponseHeadersCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.responseHeaders = append(cb.responseHeaders, f) })
}

// OnResponse registers f to run with each successful response.
func (c *Collector) OnResponse(f ResponseCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.response = append(cb.response, f) })
}

// OnHTML registers f to run for each element matching the CSS selector in
// HTML responses. It panics if selector is not valid CSS: that is a
// programming error, better found at start-up than as a silent crawl.
func (c *Collector) OnHTML(selector string, f HTMLCallback) {
	m, err := cascadia.Compile(selector)
	if err != nil {
		panic(fmt.Sprintf("magpie: OnHTML: invalid selector %q: %v", selector, err))
	}
	c.updateCallbacks(func(cb *callbacks) {
		cb.html = append(cb.html, &htmlCallback{selector: selector, label: callbackLabel{"OnHTML", selector}, matcher: m, fn: f})
	})
}

// OnHTMLDetach deactivates every OnHTML callback registered with selector.
// They stop at once and are removed after the response being processed.
func (c *Collector) OnHTMLDetach(selector string) {
	for _, cb := range c.snapshotCallbacks().html {
		if cb.selector == selector {
			cb.detached.Store(true)
		}
	}
}

// OnXML registers f to run for each node matching the XPath expression in
// HTML and XML responses. It panics if query is not valid XPath.
func (c *Collector) OnXML(query string, f XMLCallback) {
	e, err := xpath.Compile(query)
	if err != nil {
		panic(fmt.Sprintf("magpie: OnXML: invalid XPath %q: %v", query, err))
	}
	c.updateCallbacks(func(cb *callbacks) {
		cb.xml = append(cb.xml, &xmlCallback{query: query, label: callbackLabel{"OnXML", query}, expr: e, fn: f})
	})
}

// OnXMLDetach deactivates every OnXML callback registered with query.
func (c *Collector) OnXMLDetach(query string) {
	for _, cb := range c.snapshotCallbacks().xml {
		if cb.query == query {
			cb.detached.Store(true)
		}
	}
}

// OnError registers f to run for every failed request: failed in transit
// (its host unreachable: connection refused, DNS or TLS failure, whether or
// not robots.txt is obeyed; a request ended by its own context's deadline
// gets context.DeadlineExceeded itself, as in Colly), answered with status
// >= 300 (unless ParseHTTPErrorResponse), or failed in a callback that
// panicked. A request refused before it was sent (domain, depth,
// robots.txt, revisit, ...) goes to OnRefused instead; one that could not
// be stored (a storage outage) comes here, with only Request and Ctx set in
// the Response.
func (c *Collector) OnError(f ErrorCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.err = append(cb.err, f) })
}

// OnScraped registers f to run after the OnHTML and OnXML callbacks of a response.
func (c *Collector) OnScraped(f ScrapedCallback) {
	c.updateCallbacks(func(cb *callbacks) { cb.scraped = append(cb.scraped, f) })
}

// noCallbacks is what a collector without callbacks runs with.
var noCallbacks = &callbacks{}

// snapshotCallbacks returns the current lists. The value is never modified
// (a change stores a new one), so a response runs with a stable set even
// while callbacks are registered, and reading costs one atomic load.
func (c *Collector) snapshotCallbacks() *callbacks {
	if cb := c.cbs.Load(); cb != nil {
		return cb
	}
	return noCallbacks
}

// updateCallbacks applies f to a copy of the lists and publishes the copy.
// The copy's slices are clipped, so an append in f never writes into an
// array a published value uses.
func (c *Collector) updateCallbacks(f func(*callbacks)) {
	c.cbMu.Lock()
	defer c.cbMu.Unlock()
	n := *c.snapshotCallbacks()
	n.request = slices.Clip(n.request)
	n.requestHeaders = slices.Clip(n.requestHeaders)
	n.responseHeaders = slices.Clip(n.responseHeaders)
	n.response = slices.Clip(n.response)
	n.html = slices.Clip(n.html)
	n.xml = slices.Clip(n.xml)
	n.err = slices.Clip(n.err)
	n.scraped = slices.Clip(n.scraped)
	f(&n)
	n.streamTags = streamTagsOf(n.html)
	c.cbs.Store(&n)
}

// streamTagsOf returns the union of the selectors' tag names, or nil when a
// selector needs the whole document.
func streamTagsOf(cbs []*htmlCallback) []string {
	var union []string
	for _, cb := range cbs {
		tags, ok := streamTags(cb.selector)
		if !ok {
			return nil
		}
		for _, t := range tags {
			if !slices.Contains(union, t) {
				union = append(union, t)
			}
		}
	}
	return union
}

// purgeDetached drops detached OnHTML/OnXML entries.
func (c *Collector) purgeDetached() {
	c.updateCallbacks(func(cb *callbacks) {
		cb.html = deleteDetached(cb.html, func(cb *htmlCallback) bool { return cb.detached.Load() })
		cb.xml = deleteDetached(cb.xml, func(cb *xmlCallback) bool { return cb.detached.Load() })
	})
}

func deleteDetached[T any](s []T, del func(T) bool) []T {
	out := s[:0:0]
	for _, v := range s {
		if !del(v) {
			out = append(out, v)
		}
	}
	return out
}

// safely runs one user callback, turning a panic into an error wrapping
// ErrCallbackPanic so that the crawl goes on.
//
// A callback that calls runtime.Goexit (t.FailNow does) cannot be stopped
// from ending its goroutine; safely notes which callback it was, and the
// engine's worker, whose deferred calls still run, reports the request like
// a panic (see goexitError) and the scheduler replaces the worker.
//
// safely itself is for a callback outside every request's region (an item
// pipeline): it runs in a region of its own.
func (c *Collector) safely(name string, f func()) (err error) {
	token := c.marks.tokens.Add(1)
	c.region(func() { err = c.safelyAs(nil, token, name, f) })
	return err
}

// safelyFor is safely for a callback run for req, whose token (see
// markCallbacksFor) tells the sync-mode turn which region it belongs to.
func (c *Collector) safelyFor(req *Request, name string, f func()) error {
	return c.safelyAs(req, 0, name, f)
}

// safelyAs is safelyFor with the region's token given (0: req's).
func (c *Collector) safelyAs(req *Request, token uint64, name string, f func()) (err error) {
	release, err := c.serial.enter(c, req, token)
	if err != nil {
		return fmt.Errorf("%s not run: %w", name, err)
	}
	defer release()
	returned := false
	defer func() {
		if v := recover(); v != nil {
			err = &CallbackPanicError{Callback: name, Value: v, Stack: debug.Stack()}
			return
		}
		if !returned {
			c.goexits.Store(goroutineID(), name)
		}
	}()
	f()
	returned = true
	return nil
}

// callbackLabel names a callback for a CallbackStuckError: its kind and,
// for OnHTML and OnXML, its selector.
type callbackLabel struct{ kind, selector string }

// Labels of the callbacks without a selector.
var (
	labelOnRequest         = callbackLabel{kind: "OnRequest"}
	labelOnRequestHeaders  = callbackLabel{kind: "OnRequestHeaders"}
	labelOnResponseHeaders = callbackLabel{kind: "OnResponseHeaders"}
	labelOnResponse        = callbackLabel{kind: "OnResponse"}
	labelOnScraped         = callbackLabel{kind: "OnScraped"}
	labelOnError           = callbackLabel{kind: "OnError"}
	labelItemPipeline      = callbackLabel{kind: "item pipeline"}
)

// safelyAt is safely for a callback run for req, which it records as
// running, so that a callback that never returns can be named (see
// run.guard); the cost is one atomic store.
func (c *Collector) safelyAt(req *Request, label *callbackLabel, f func()) error {
	return c.safelyAtAs(req, 0, label, f)
}

// safelyAtAs is safelyAt with the region's token given (0: req's).
func (c *Collector) safelyAtAs(req *Request, token uint64, label *callbackLabel, f func()) error {
	if req != nil {
		req.running.Store(label)
	}
	return c.safelyAs(req, token, label.kind, f)
}

// goexitError is the error for a request whose processing was cut short on
// this goroutine by a panic that escaped (v, a bug) or, v nil, by
// runtime.Goexit in the callback safely noted.
func (c *Collector) goexitError(v any) error {
	if v != nil {
		return &CallbackPanicError{Callback: "engine", Value: v, Stack: debug.Stack()}
	}
	name := "callback"
	if n, ok := c.goexits.LoadAndDelete(goroutineID()); ok {
		name = n.(string)
	}
	return &CallbackPanicError{Callback: name, Value: ErrCallbackGoexit, Stack: debug.Stack()}
}

// handleOnError runs the OnError callbacks; a panic in one is logged, as
// there is nowhere left to deliver it. The caller marks the goroutine as
// running callbacks when that matters (sync mode, outside the engine's own
// workers, which are marked already).
func (c *Collector) handleOnError(resp *Response, err error) {
	c.handleOnErrorAs(resp, 0, err)
}

// handleOnErrorAs is handleOnError in the region of the given token (0: the
// one resp.Request carries).
func (c *Collector) handleOnErrorAs(resp *Response, token uint64, err error) {
	c.watch.failed(resp, err)
	if c.debugging() {
		c.emit(evError, resp.Request, responseValues(resp, err))
	}
	cbs := c.snapshotCallbacks()
	for _, f := range cbs.err {
		if perr := c.safelyAtAs(resp.Request, token, &labelOnError, func() { f(resp, err) }); perr != nil {
			c.logger.Error("OnError callback panicked", "url", logURL(resp.Request), "err", perr)
		}
	}
}

func urlString(r *Request) string {
	if r == nil || r.URL == nil {
		return ""
	}
	return r.URL.String()
}

// serialCallbacks keeps a synchronous collector's callbacks from running
// concurrently, as they never do in Colly, where a sync crawl runs on the
// caller's goroutine: a sync program may append to a slice from OnHTML
// without a lock. Downloads still overlap; only user code takes turns. Async
// collectors and queue runs with more than one thread (whose threads run
// callbacks concurrently in Colly too) do not take turns; a one-thread queue
// run does. The zero value is ready to use; each
// collector has its own (a clone's callbacks may run while the parent's
// callback waits for the clone's crawl).
type serialCallbacks struct {
	// off is set by ConcurrentCallbacks.
	off  atomic.Bool
	once sync.Once
	// turn holds a value while a callback runs.
	turn chan struct{}
	// owner is the token of the region holding turn (see callbackMarks),
	// so that a callback that runs another one on its goroutine (OnHTML's
	// Visit refused to OnRefused) does not wait for itself.
	owner atomic.Uint64
	// ownerDone is the Done channel of the crawl whose callback holds turn
	// (nil for a callback outside a crawl, such as a top-level Visit's
	// refusal), for a waiter that no longer sees that crawl (Stop cleared
	// it) but must not wait for its stuck callback forever.
	// It holds a <-chan struct{} (nil when no crawl's callback holds turn),
	// which an atomic.Value stores without allocating.
	ownerDone atomic.Value
	// release gives the turn back; made with turn (see init).
	release func()
}

func noRelease() {}

// ConcurrentCallbacks lets a synchronous collector run its callbacks
// concurrently on the download workers, as an async collector always does,
// instead of one at a time as in Colly. It is for callbacks that wait for
// one another: a callback that blocks until another request's callback has
// run would wait forever while they take turns (in Colly the other request
// runs inside the first one's Visit or Retry; here it is queued). Such
// callbacks must guard what they share.
func ConcurrentCallbacks() CollectorOption {
	return func(c *Collector) { c.serial.off.Store(true) }
}

// enter waits for the turn to run a callback of c and returns the function
// that gives it back. It returns at once, with nothing to give back, for an
// async collector, a queue run of several threads, or a callback nested in
// one holding the turn on this goroutine. If the crawl stops while it waits (a callback is stuck),
// it returns ErrStopped: the stopped crawl's remaining callbacks are skipped
// rather than run concurrently or waited for forever.
func (s *serialCallbacks) enter(c *Collector, req *Request, token uint64) (func(), error) {
	if s.off.Load() {
		return noRelease, nil
	}
	if req != nil && req.run != nil && req.run.takesNoTurns() {
		// A request of an async crawl: no lock (this is once per
		// callback call, an OnHTML's for each element).
		return noRelease, nil
	}
	c.runMu.Lock()
	r := c.run
	c.runMu.Unlock()
	// done ends a wait for the turn; mine is the crawl this callback
	// belongs to, recorded while it holds the turn.
	var done, mine <-chan struct{}
	if r != nil {
		if r.takesNoTurns() {
			return noRelease, nil
		}
		done = r.ctx.Done()
		mine = done
	} else if c.Async { // read as snapshot reads it, without building one
		return noRelease, nil
	} else if d, _ := s.ownerDone.Load().(<-chan struct{}); d != nil {
		done = d
	}
	s.once.Do(s.init)
	id := token
	if id == 0 {
		id = c.tokenFor(req)
	}
	if s.owner.Load() == id {
		return noRelease, nil
	}
	select {
	case s.turn <- struct{}{}:
	default:
		select {
		case s.turn <- struct{}{}:
		case <-done:
			return nil, ErrStopped
		}
	}
	s.owner.Store(id)
	if mine != nil {
		s.ownerDone.Store(mine)
	}
	return s.release, nil
}

// takesNoTurns reports whether r's callbacks run concurrently: an async
// crawl's, or a queue run's with more than one thread.
func (r *run) takesNoTurns() bool { return r.cfg.async || (r.queueMode && cap(r.tokens) > 1) }

// init makes the turn and the function that gives it back, once: a
// callback that takes the turn allocates neither.
func (s *serialCallbacks) init() {
	s.turn = make(chan struct{}, 1)
	s.release = func() {
		s.owner.Store(0)
		s.ownerDone.Store((<-chan struct{})(nil))
		<-s.turn
	}
}

// The callback mark: which goroutines are running this collector's
// callbacks. Colly's API gives c.Visit and c.Stop no handle on the request
// they are called from, yet a call from a callback must not wait for the
// crawl it is part of. Go has no goroutine-local state, and reading the
// goroutine's ID from runtime.Stack costs a microsecond or more (it formats
// the whole stack), once per page at least. So a stretch of engine work that
// runs user code (a region: a request's fetch or analysis, a refusal's
// callbacks, an item's pipelines) runs inside one of a few marker frames,
// which the collector holds alone while any region of it is open: a call
// finds out whether it comes from a callback by looking for its collector's
// frame among the return addresses of its own stack (runtime.Callers, no
// formatting). A goroutine a callback starts has a stack of its own, so its
// calls are top-level ones, as before. Only when more collectors than there
// are frames run callbacks at once do the extra ones mark goroutine IDs.
//
// The sync-mode turn (serialCallbacks) needs to know which region holds it;
// each region has a token for that, which its request carries (see
// markCallbacksFor), and the requests its callbacks make copy.

// markSlots is how many collectors can run callbacks at once with a marker
// frame each.
const markSlots = 8

// The marker frames. Each calls f from one call site, whose return address
// (markPCs) identifies it on a stack.
//
//go:noinline
func markFrame0(f func()) { f() }

//go:noinline
func markFrame1(f func()) { f() }

//go:noinline
func markFrame2(f func()) { f() }

//go:noinline
func markFrame3(f func()) { f() }

//go:noinline
func markFrame4(f func()) { f() }

//go:noinline
func markFrame5(f func()) { f() }

//go:noinline
func markFrame6(f func()) { f() }

//go:noinline
func markFrame7(f func()) { f() }

// callMarked runs f in the marker frame of slot (1 to markSlots). Direct
// calls, not a call through markFrames, so that f does not escape: a
// region's closure stays on its caller's stack.
func callMarked(slot int32, f func()) {
	switch slot {
	case 1:
		markFrame0(f)
	case 2:
		markFrame1(f)
	case 3:
		markFrame2(f)
	case 4:
		markFrame3(f)
	case 5:
		markFrame4(f)
	case 6:
		markFrame5(f)
	case 7:
		markFrame6(f)
	default:
		markFrame7(f)
	}
}

var markFrames = [markSlots]func(func()){markFrame0, markFrame1, markFrame2, markFrame3, markFrame4, markFrame5, markFrame6, markFrame7}

// markPCs holds, for each marker frame, the return address of its call of
// f as runtime.Callers reports it.
var markPCs = func() (pcs [markSlots]uintptr) {
	for i, frame := range markFrames {
		frame(func() {
			var pc [1]uintptr
			runtime.Callers(2, pc[:]) // 0: Callers, 1: this func, 2: the frame
			pcs[i] = pc[0]
		})
	}
	return pcs
}()

// markOwners holds the collector each marker frame belongs to while that
// collector has a region open (nil: free). Process-wide, as the frames are.
var markOwners [markSlots]atomic.Pointer[Collector]

// callbackMarks is a collector's side of the callback mark.
type callbackMarks struct {
	// mu serializes the opening of a first region and the closing of a
	// last, when the collector takes and gives back its marker frame.
	mu sync.Mutex
	// open counts the open regions: changed from and to 0 only under mu,
	// otherwise by compare-and-swap.
	open atomic.Int64
	// slot is the collector's marker frame plus one, 0 for none (too many
	// collectors run callbacks): its regions then mark goroutine IDs in
	// inCallback. Fixed while any region is open; written under mu.
	slot atomic.Int32
	// tokens numbers the regions, for the sync-mode turn.
	tokens atomic.Uint64
}

// goroutineIDCalls counts goroutineID calls, for the test that keeps them
// off the per-page path.
var goroutineIDCalls atomic.Uint64

// goroutineID parses "goroutine 123 [running]:" from runtime.Stack.
func goroutineID() uint64 {
	goroutineIDCalls.Add(1)
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// region runs f marked as running c's callbacks.
func (c *Collector) region(f func()) {
	m := &c.marks
	slot := m.enter(c)
	defer m.exit(slot)
	if slot > 0 {
		callMarked(slot, f)
		return
	}
	// No marker frame left: mark the goroutine by its ID.
	id := goroutineID()
	if _, loaded := c.inCallback.LoadOrStore(id, struct{}{}); loaded {
		f()
		return
	}
	defer c.inCallback.Delete(id)
	f()
}

// enter opens a region and returns the collector's marker frame plus one (0:
// none). Only the first region takes the lock, to take a frame.
func (m *callbackMarks) enter(c *Collector) int32 {
	for {
		n := m.open.Load()
		if n == 0 {
			break
		}
		if m.open.CompareAndSwap(n, n+1) {
			return m.slot.Load() // fixed while a region is open
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open.Load() == 0 {
		m.slot.Store(0)
		for i := range markOwners {
			if markOwners[i].CompareAndSwap(nil, c) {
				m.slot.Store(int32(i) + 1)
				break
			}
		}
	}
	m.open.Add(1)
	return m.slot.Load()
}

// exit closes a region; the last one gives the marker frame back.
func (m *callbackMarks) exit(slot int32) {
	for {
		n := m.open.Load()
		if n <= 1 {
			break
		}
		if m.open.CompareAndSwap(n, n-1) {
			return
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open.Add(-1) == 0 && slot > 0 {
		markOwners[slot-1].Store(nil)
	}
}

// callingFromCallback reports whether the current goroutine is running one
// of c's callbacks (inside a region of c).
func (c *Collector) callingFromCallback() bool {
	m := &c.marks
	if m.open.Load() == 0 {
		return false
	}
	slot := m.slot.Load()
	if slot == 0 {
		_, ok := c.inCallback.Load(goroutineID())
		return ok
	}
	// The frame found belongs to an open region; it is c's if c still
	// holds the frame (it held it while the region was open).
	return onStack(markPCs[slot-1]) && markOwners[slot-1].Load() == c
}

// onStack reports whether pc is among the return addresses of the current
// goroutine's stack.
func onStack(pc uintptr) bool {
	var buf [64]uintptr
	for skip := 2; ; skip += len(buf) {
		n := runtime.Callers(skip, buf[:])
		if slices.Contains(buf[:n], pc) {
			return true
		}
		if n < len(buf) {
			return false
		}
	}
}

// markCallbacksFor runs f, the callbacks of req, in a region whose token req
// carries meanwhile: the sync-mode turn of each callback of req, and of the
// refusals of the requests its callbacks make (Request.Visit and kin, which
// copy it), finds it there.
func (c *Collector) markCallbacksFor(req *Request, f func()) {
	req.regionGID.Store(c.marks.tokens.Add(1))
	defer req.regionGID.Store(0)
	c.region(f)
}

// withCallbackMark runs f as c's callbacks, with the token their sync-mode
// turn goes by (see tokenFor): req's, if it has one (nil: none), that of the
// callback holding the turn when called from c's callbacks, or a new one.
func (c *Collector) withCallbackMark(req *Request, f func(token uint64)) {
	token := c.tokenFor(req)
	c.region(func() { f(token) })
}

// newRegion runs f as c's callbacks, in a region of its own: for engine work
// that no callback is waiting in (an item's OnError, a stuck request's).
func (c *Collector) newRegion(f func(token uint64)) {
	token := c.marks.tokens.Add(1)
	c.region(func() { f(token) })
}

// withTokenOn is withCallbackMark for the callbacks of req (a refusal, a
// request whose fetch failed): req carries the token while f runs, unless
// it has one already (a request made by a callback).
func (c *Collector) withTokenOn(req *Request, f func()) {
	if req.regionGID.Load() != 0 {
		c.region(f)
		return
	}
	c.withCallbackMark(nil, func(token uint64) {
		req.regionGID.Store(token)
		defer req.regionGID.Store(0)
		f()
	})
}

// tokenFor returns the token of the region running req's callbacks. For a
// request without one (nil: none), called from inside c's callbacks, it is
// the token of the callback holding the sync-mode turn, which, as user code
// runs only while holding it, is the caller's; elsewhere a new one.
func (c *Collector) tokenFor(req *Request) uint64 {
	if req != nil {
		if t := req.regionGID.Load(); t != 0 {
			return t
		}
	}
	if c.callingFromCallback() {
		return c.heldToken()
	}
	return c.marks.tokens.Add(1)
}

// heldToken is tokenFor for a caller known to run in c's callbacks: the
// token of the callback holding the turn, or a new one when none does
// (callbacks that do not take turns).
func (c *Collector) heldToken() uint64 {
	if t := c.serial.owner.Load(); t != 0 {
		return t
	}
	return c.marks.tokens.Add(1)
}
