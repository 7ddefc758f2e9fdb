package magpie

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/limits"
)

// fetch is the download stage of one request, a list of named steps; each
// reports whether the exchange is over (x.out is then its response). It
// runs the request-side callbacks and never returns nil: a failure travels
// in the Response, for the analysis stage to deliver to OnError.
func (c *Collector) fetch(ctx context.Context, cfg *config, cbs *callbacks, req *Request) *Response {
	x := &exchange{c: c, cfg: cfg, cbs: cbs, req: req, resp: &Response{Request: req, Ctx: req.Ctx}}
	host := req.URL.Host
	defer func() {
		req.ticket.Done(x.result)
		c.watch.fetched(host, x.result.StatusCode, x.result.Latency)
	}()
	hctx, cancel := fetchContext(ctx, req.stdContext())
	defer cancel()
	x.ctx = hctx
	switch {
	case x.stopped(): // StdlibContext done, or the crawl stopped
	case x.blocked(): // BlockHost since it was queued
	case x.recheckRobots(): // robots.txt was unreadable at admission
	case x.conditional(): // recrawl: validators of the stored page (recrawl.go)
	case x.onRequest(): // OnRequest; Abort drops the request
	case x.robotsForAgent(): // the User-Agent OnRequest left
	case x.fromCache(): // CacheDir hit
	case x.onRequestHeaders(): // OnRequestHeaders; Abort fails the request
	case x.unresolvedHost(): // PolitenessIP found no address for the host
	case x.checkHead(): // CheckHead: a HEAD first
	default:
		x.send() // HTTP or the Fetcher, headers, body, cache
	}
	return x.out
}

// exchange is one request in the download stage, passed through its steps.
type exchange struct {
	c    *Collector
	cfg  *config
	cbs  *callbacks
	req  *Request
	resp *Response
	// result is reported to the limiter (the request's ticket) at the end.
	result limits.Result
	// ctx is the fetch's context: the crawl's and the StdlibContext.
	ctx context.Context
	// down is the error of a host found unreachable when robots.txt was
	// checked again: OnRequest runs, then the request fails with it.
	down     error
	useCache bool
	// revisit is the page's recrawl state, set by conditional (recrawl.go).
	revisit *revisit
	// out is the response once the exchange is over.
	out *Response
}

// fail ends the exchange with err.
func (x *exchange) fail(err error) bool {
	err = stdContextErr(x.req, err)
	x.resp.err = err
	x.result.Err = err
	x.out = x.resp
	return true
}

// aborted ends the exchange dropped by Abort, without an error.
func (x *exchange) aborted() bool {
	x.resp.aborted = true
	x.out = x.resp
	return true
}

// stopped ends the exchange when StdlibContext is done (or the crawl
// stopped): nothing more may reach a server, and the request, never
// started, is no failure (notStartedErr; no OnError call).
func (x *exchange) stopped() bool {
	if x.ctx.Err() == nil {
		return false
	}
	x.resp.err = notStartedErr(x.req)
	x.result.Err = x.resp.err
	x.out = x.resp
	return true
}

// blocked refuses a request whose host BlockHost blocked after it was
// queued: it is not sent, and goes to OnRefused (a queue run acknowledges
// its entry).
func (x *exchange) blocked() bool {
	if err := x.c.checkBlocked(x.req.URL); err != nil {
		x.c.logRefusal(x.req, err)
		return x.fail(&refusedInFetch{err})
	}
	return false
}

// recheckRobots checks again a request admitted while its host's
// robots.txt could not be read, first, so that waiting for robots.txt runs
// no callback (OnRequest runs once per try of the request).
func (x *exchange) recheckRobots() bool {
	req := x.req
	if req.robotsWait.IsZero() || req.Method == http.MethodHead {
		return false
	}
	if err := x.c.recheckRobots(x.ctx, x.cfg, req); err != nil {
		if _, ok := errors.AsType[*hostDownError](err); !ok {
			return x.fail(robotsVerdict(err))
		}
		x.down = err // OnRequest runs, then the request fails with it
	}
	return false
}

// onRequest runs OnRequest; Abort drops the request silently.
func (x *exchange) onRequest() bool {
	c, req := x.c, x.req
	if _, ok := (*req.Headers)["Accept"]; !ok {
		req.Headers.Set("Accept", "*/*")
	}
	if c.debugging() {
		c.emit(evRequest, req, requestValues(req))
	}
	for _, f := range x.cbs.request {
		if err := c.safelyAt(req, &labelOnRequest, func() { f(req) }); err != nil {
			return x.fail(err)
		}
	}
	if req.IsAbort() {
		return x.aborted()
	}
	if x.down != nil {
		return x.fail(x.down)
	}
	return false
}

// robotsForAgent checks robots.txt again when OnRequest changed the
// User-Agent (extensions.RandomUserAgent does): robots.txt must judge the
// agent actually sent.
func (x *exchange) robotsForAgent() bool {
	req := x.req
	if ua := x.cfg.userAgentOf(*req.Headers); ua != req.robotsUA && req.Method != http.MethodHead {
		if err := x.c.checkRobotsAgain(x.ctx, x.cfg, req, ua); err != nil {
			return x.fail(robotsVerdict(err))
		}
	}
	return false
}

// fromCache answers a GET from CacheDir. A POST without a Content-Type gets
// the form type first, whether or not a cache is used.
func (x *exchange) fromCache() bool {
	c, cfg, req, resp := x.c, x.cfg, x.req, x.resp
	if req.Method == http.MethodPost && req.Headers.Get("Content-Type") == "" {
		req.Headers.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	x.useCache = cfg.cache != nil && req.Method == http.MethodGet && req.Headers.Get("Cache-Control") != "no-cache"
	if !x.useCache {
		return false
	}
	cr, ok := cfg.cache.get(cacheKey(req.Method, urlkey.Canonical(req.URL, cfg.sortQuery)))
	if !ok {
		return false
	}
	resp.StatusCode, resp.Body, resp.FromCache = cr.StatusCode, cr.Body, true
	h := cr.Header.Clone()
	resp.Headers = &h
	if u, err := url.Parse(cr.URL); err == nil && cr.URL != "" {
		req.URL = u
	}
	x.result.StatusCode = cr.StatusCode
	if err := c.responseHeaders(x.cbs, resp); err != nil {
		return x.fail(err)
	}
	x.out = c.finishBody(cfg, resp)
	return true
}

// onRequestHeaders runs OnRequestHeaders; Abort fails the request with
// ErrAbortedBeforeRequest.
func (x *exchange) onRequestHeaders() bool {
	c, req := x.c, x.req
	if c.debugging() {
		c.emit(evRequestHeaders, req, requestValues(req))
	}
	for _, f := range x.cbs.requestHeaders {
		if err := c.safelyAt(req, &labelOnRequestHeaders, func() { f(req) }); err != nil {
			return x.fail(err)
		}
	}
	if req.IsAbort() {
		return x.fail(ErrAbortedBeforeRequest)
	}
	return false
}

// unresolvedHost fails a request whose host the gate keys by address
// (PolitenessIP) and whose name did not resolve, with the lookup's error (a
// *net.DNSError), as the dial would have failed: it is sent nowhere, and no
// second lookup can send it to a server that no slot spaced.
func (x *exchange) unresolvedHost() bool {
	if x.req.unresolved == nil {
		return false
	}
	return x.fail(x.req.unresolved)
}

// checkHead sends a HEAD before a GET (CheckHead) and runs its callbacks.
func (x *exchange) checkHead() bool {
	c, cfg, req := x.c, x.cfg, x.req
	if !cfg.checkHead || req.Method != http.MethodGet {
		return false
	}
	c.counts.sent.Add(1)
	f, err := c.roundTrip(x.ctx, cfg, req, http.MethodHead)
	if err != nil {
		return x.fail(err)
	}
	_ = f.body.Close()
	if f.status >= 300 && !cfg.parseHTTPErrors {
		return x.fail(&HTTPError{StatusCode: f.status, Status: f.statusText})
	}
	if err := c.headResponse(x.cbs, req, f); err != nil {
		return x.fail(err)
	}
	if req.IsAbort() {
		return x.aborted()
	}
	return false
}

// send sends the request (HTTP or the Fetcher), runs OnResponseHeaders,
// reads and decodes the body, and caches it.
func (x *exchange) send() {
	c, cfg, req, resp := x.c, x.cfg, x.req, x.resp
	c.counts.sent.Add(1)
	f, err := c.send(x.ctx, cfg, req)
	if f != nil {
		req.ProxyURL = f.proxyURL
		x.result.Latency = f.latency
	}
	if err != nil {
		if errors.Is(err, ErrPrivateNetwork) && f != nil && len(f.redirects) == 0 {
			// DenyPrivateNetworks refused the dial: nothing was sent.
			x.fail(&refusedInFetch{err})
			return
		}
		x.fail(err)
		return
	}
	defer f.body.Close()
	if f.finalURL != nil {
		req.URL = f.finalURL
	}
	resp.StatusCode, resp.Headers, resp.Redirects, resp.Trace = f.status, &f.header, f.redirects, f.trace
	if f.status < 200 {
		// net/http skips interim 1xx responses, so this one was final: a
		// 101 to a request that asked for no upgrade hands the connection
		// over, and its body, the raw connection, obeys no timeout.
		c.responseCount.Add(1)
		c.counts.response(f.status, 0)
		x.result.StatusCode = f.status
		x.fail(fmt.Errorf("%w: %s", ErrInformationalResponse, f.statusText))
		return
	}
	// A body that ignores the request's context (a switched protocol's
	// connection, a RoundTripper of the user's) is closed when the context
	// ends, so that Stop never waits on a read.
	if !f.bodyObeysContext {
		stopClosing := context.AfterFunc(x.ctx, func() { _ = f.body.Close() })
		defer stopClosing()
	}
	resp.retryAfter = c.capRetryAfter(req, parseRetryAfter(f.header.Get("Retry-After")))
	x.result.StatusCode, x.result.RetryAfter = f.status, cfg.hostHold(resp.retryAfter)
	if err := c.responseHeaders(x.cbs, resp); err != nil {
		x.fail(err)
		return
	}
	var into *[]byte
	if cfg.reuseBody {
		into = bodyBuffers.Get().(*[]byte)
	}
	body, truncated, err := readBodyInto(f.body, f.header, req.URL.Path, int64(cfg.maxBodySize), into)
	if err != nil {
		if into != nil {
			putBodyBuffer(into)
		}
		x.fail(fmt.Errorf("reading body: %w", err))
		return
	}
	resp.reused = into
	c.responseCount.Add(1)
	c.counts.response(f.status, len(body))
	resp.Body, resp.Truncated = body, truncated
	if truncated {
		c.logger.Warn("response body truncated at MaxBodySize", "url", req.URL.Redacted(), "request_id", req.ID, "max_body_size", cfg.maxBodySize)
	}
	if x.useCache && !truncated && f.status != http.StatusNotModified {
		// A body cut at MaxBodySize is not the page: cached, it would be
		// replayed as whole (Truncated false) to this run and the next.
		cr := &cachedResponse{StatusCode: f.status, Header: f.header, Body: body, URL: req.URL.String()}
		if err := cfg.cache.put(cacheKey(req.Method, urlkey.Canonical(req.URL, cfg.sortQuery)), cr); err != nil {
			c.logger.Warn("caching response", "url", req.URL.Redacted(), "err", err)
		}
	}
	x.out = c.finishBody(cfg, resp)
	// Closed now rather than on return: with an Archiver, closing the body
	// archives the exchange, whose capture the recrawl state keeps.
	_ = f.body.Close()
	x.recrawlOutcome(x.out)
	x.result.Err = x.out.err
}

// headResponse shows the CheckHead response to OnResponse before the GET is
// sent, as Colly does. Its Request is a HEAD copy of req with the same ID,
// Ctx and Depth; links visited from it belong to req's crawl.
func (c *Collector) headResponse(cbs *callbacks, req *Request, f *fetched) error {
	if len(cbs.response) == 0 {
		return nil
	}
	u := *req.URL
	head := &Request{
		URL: &u, Headers: req.Headers, Host: req.Host, Ctx: req.Ctx, Depth: req.Depth,
		Method: http.MethodHead, ID: req.ID, ProxyURL: f.proxyURL,
		collector: c, stdCtx: req.stdCtx,
	}
	head.attempt, head.run, head.parentRun = req.attempt, req.run, req.parentRun
	hdr := f.header
	resp := &Response{StatusCode: f.status, Headers: &hdr, Request: head, Ctx: req.Ctx, Body: []byte{}}
	for _, cb := range cbs.response {
		if err := c.safelyAt(req, &labelOnResponse, func() { cb(resp) }); err != nil {
			return err
		}
	}
	if head.IsAbort() {
		req.Abort()
	}
	return nil
}

// fetchContext is the context one fetch runs under: derived from std (the
// StdlibContext), so that its cancellation stops new requests at once and
// its deadline surfaces as context.DeadlineExceeded, and cancelled too when
// the crawl's own context (Stop) ends.
func fetchContext(crawl, std context.Context) (context.Context, context.CancelFunc) {
	if std == context.Background() {
		// No StdlibContext (the usual case): nothing to derive from but
		// the crawl's context, which carries no values; one context
		// rather than a context and an AfterFunc.
		return context.WithCancel(crawl)
	}
	ctx, cancel := context.WithCancel(std)
	stop := context.AfterFunc(crawl, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// stdContextErr returns the error of the request's own context (StdlibContext
// or a per-request context) itself when that context ending is what failed
// the fetch, as Colly does, so that err == context.DeadlineExceeded holds in
// OnError and for Visit's result; any other error is returned as it is.
func stdContextErr(req *Request, err error) error {
	cerr := req.stdContext().Err()
	if cerr == nil || err == cerr {
		return err
	}
	if _, refused := errors.AsType[*refusedInFetch](err); refused {
		return err
	}
	if _, pending := errors.AsType[*robotsPendingError](err); pending {
		return err
	}
	// net/http reports the context's cause, which a context made with
	// WithCancelCause or WithTimeoutCause sets to an error of the caller's.
	if errors.Is(err, cerr) || errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(req.stdContext())) {
		return cerr
	}
	return err
}

// responseHeaders runs OnResponseHeaders; Abort there fails the request.
func (c *Collector) responseHeaders(cbs *callbacks, resp *Response) error {
	if c.debugging() {
		c.emit(evResponseHeaders, resp.Request, responseValues(resp, nil))
	}
	for _, f := range cbs.responseHeaders {
		if err := c.safelyAt(resp.Request, &labelOnResponseHeaders, func() { f(resp) }); err != nil {
			return err
		}
	}
	if resp.Request.IsAbort() {
		return ErrAbortedAfterHeaders
	}
	return nil
}

// finishBody applies the status check and converts text to UTF-8.
func (c *Collector) finishBody(cfg *config, resp *Response) *Response {
	if resp.StatusCode >= 300 && !cfg.parseHTTPErrors {
		resp.err = &HTTPError{StatusCode: resp.StatusCode, Status: http.StatusText(resp.StatusCode)}
	}
	ct := ""
	if resp.Headers != nil {
		ct = resp.Headers.Get("Content-Type")
	}
	body, err := toUTF8(resp.Body, ct, resp.Request.ResponseCharacterEncoding, cfg.detectCharset)
	if err != nil {
		c.logger.Warn("charset conversion failed; body left as received", "url", resp.Request.URL.Redacted(), "err", err)
	} else {
		resp.setDecoded(body) // the bytes received stay for Save and RawBody
	}
	return resp
}

// capRetryAfter caps a server's Retry-After at the limiter's MaxHold, the
// cap of every wait a server imposes (the host's hold and a retry's wait
// alike), and says so in the log: a server cannot park the crawl for years.
func (c *Collector) capRetryAfter(req *Request, d time.Duration) time.Duration {
	hold := c.shared.limiter.MaxHold()
	if d <= hold {
		return d
	}
	c.logger.Warn("Retry-After capped at MaxHold", "url", req.URL.Redacted(), "host", req.URL.Host, "request_id", req.ID,
		"retry_after", d, "duration", hold)
	return hold
}

// parseRetryAfter reads Retry-After in seconds or as an HTTP date (0 if absent
// or invalid; a number of seconds too large for a Duration is the largest one).
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || s > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// download is the scheduler's Downloader function. It never returns an
// error: failures travel inside the Response so that the analyzer delivers
// them to OnError and counts the request finished.
func (r *run) download(ctx context.Context, req *Request) (resp *Response, _ error) {
	defer func() { <-r.tokens }()
	if r.feedCtx.Err() != nil {
		// The run is stopping (Stop, or a queue run's context ended):
		// nothing may start now, not even a request already dispatched.
		return &Response{Request: req, Ctx: req.Ctx, err: notStartedErr(req)}, nil
	}
	defer func() {
		if v := recover(); v != nil {
			resp = &Response{Request: req, Ctx: req.Ctx, err: &CallbackPanicError{Callback: "download", Value: v}}
		}
	}()
	cbs := r.c.snapshotCallbacks()
	if !r.c.userCodeInFetch(r.cfg, cbs) {
		// Nothing in the fetch can call Visit, so the goroutine needs no
		// mark (and the sync-mode goroutine-ID lookup is saved), and no
		// callback can block it.
		return r.c.fetch(ctx, r.cfg, cbs, req), nil
	}
	g, ok := r.guard(req, "download", func() {
		r.c.markCallbacksFor(req, func() { resp = r.c.fetch(ctx, r.cfg, cbs, req) })
	})
	switch {
	case !ok:
		// A callback never returned: req is finished as stuck, and the
		// analyzer passes this response over.
		return &Response{Request: req, Ctx: req.Ctx, err: ErrCallbackStuck}, nil
	case g.panicked:
		return &Response{Request: req, Ctx: req.Ctx, err: g.exitErr}, nil
	case g.exitErr != nil:
		// A request callback called runtime.Goexit: the request is
		// reported and finished here, like a panic.
		resp = &Response{Request: req, Ctx: req.Ctx}
		r.abandon(req, resp, g.exitErr)
		return resp, nil
	}
	return resp, nil
}

// userCodeInFetch reports whether a fetch with cbs runs user code that might
// call Visit: request-side callbacks, OnResponse for a CheckHead response,
// or a redirect handler.
func (c *Collector) userCodeInFetch(cfg *config, cbs *callbacks) bool {
	if len(cbs.request) > 0 || len(cbs.requestHeaders) > 0 || len(cbs.responseHeaders) > 0 ||
		(cfg.checkHead && len(cbs.response) > 0) {
		return true
	}
	c.shared.redirectMu.RLock()
	defer c.shared.redirectMu.RUnlock()
	return c.shared.redirectHandler != nil
}

// errNotStarted is the outcome of a request that a stopping run did not
// start: it is finished as cut short by Stop (its queue entry released).
var errNotStarted = fmt.Errorf("%w: request not started", ErrStopped)

// notStartedErr is the outcome of req, which a stopping run did not send:
// errNotStarted, wrapping the error of req's StdlibContext too when that
// context has ended, so that a sync Visit whose request never left returns
// an error errors.Is both ErrStopped and context.Canceled (or
// DeadlineExceeded).
func notStartedErr(req *Request) error {
	if cerr := req.stdContext().Err(); cerr != nil {
		return fmt.Errorf("%w: %w", errNotStarted, cerr)
	}
	return errNotStarted
}
