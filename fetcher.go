package magpie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
)

// Fetcher downloads the requests it selects in place of the HTTP client: a
// headless browser (package render), an archive, a test double. Everything
// around the exchange stays the same for a fetched request: OnRequest and
// OnRequestHeaders, the robots.txt check, the LimitRules (the request holds
// its host's slot and a download worker while Fetch runs), OnResponseHeaders,
// MaxBodySize, charset conversion, the status check, OnResponse, OnHTML,
// OnError, retries, the queue and the items.
//
// Only GET requests are offered to a Fetcher; the CheckHead pre-flight,
// robots.txt and sitemaps stay on HTTP. Its methods are called from many
// download workers at once and must be safe for concurrent use; they must not
// call back into the Collector.
type Fetcher interface {
	// Selects reports whether Fetch should download req. It runs after the
	// OnRequest and OnRequestHeaders callbacks, so they can mark a request
	// for it.
	Selects(req *Request) bool
	// Fetch downloads fr. It must give up when ctx is done (Stop, the
	// StdlibContext). An error goes to OnError with the request, as an HTTP
	// failure does; a panic is recovered as a *CallbackPanicError.
	Fetch(ctx context.Context, fr *FetchRequest) (*FetchResult, error)
}

// Idler is an optional interface of a Fetcher that holds resources between
// requests, such as a browser process. The Collector calls Idle when a crawl
// run that used the Fetcher has stopped (Wait, Stop, the end of a sync Visit
// or of RunQueue), after its last Fetch returned and before Wait or Stop
// returns, unless another run of the Collector or its clones is still using
// it. A Fetch after Idle must start again what Idle ended.
type Idler interface {
	Idle()
}

// FetchRequest is what a Fetcher is asked to download. The Collector builds
// it for each call; the Fetcher may read it from several goroutines but must
// not keep it after Fetch returns.
type FetchRequest struct {
	// URL is the request's URL (a copy).
	URL *url.URL
	// Method is always GET.
	Method string
	// Header holds the headers the HTTP client would send: the request's own,
	// with the User-Agent and without the credential headers the crawl may
	// not send to this host (see CredentialHosts).
	Header http.Header
	// Cookies are the ones the Collector's cookie jar holds for URL (nil
	// without a jar).
	Cookies []*http.Cookie
	// RequestID is the request's ID, for logs.
	RequestID uint32

	// sent reports the moment the request reached the server.
	sent func(time.Time)
}

// Sent tells the Collector when the request reached the server, the moment
// from which its host's Delay is measured. The latest safe moment is when the
// first byte of the response arrived. Only the first report counts; without
// one, the moment Fetch returns is taken.
func (fr *FetchRequest) Sent(at time.Time) {
	if fr.sent != nil {
		fr.sent(at)
	}
}

// FetchResult is a downloaded page.
type FetchResult struct {
	// StatusCode is the HTTP status of the response (required, > 0).
	StatusCode int
	// Header are the response headers. Content-Encoding and Content-Length
	// are dropped: Body is taken as it is, not encoded.
	Header http.Header
	// Body is the content that reaches the callbacks (within MaxBodySize).
	// Its charset is read from the Content-Type header as for HTTP.
	Body []byte
	// FinalURL is where the page was found after redirects (nil: URL). The
	// request's URL becomes FinalURL, as after an HTTP redirect.
	FinalURL *url.URL
	// Cookies are stored in the Collector's cookie jar for FinalURL, so
	// that later requests, over HTTP or not, send them.
	Cookies []*http.Cookie
}

// ErrInvalidFetchResult is returned when a Fetcher returns no error and no
// usable result (nil, or a status code below 100).
var ErrInvalidFetchResult = errors.New("fetcher returned an invalid result")

// WithFetcher sets the Fetcher, as SetFetcher does.
func WithFetcher(f Fetcher) CollectorOption {
	return func(c *Collector) { c.SetFetcher(f) }
}

// SetFetcher hands the GET requests that f selects to f instead of the HTTP
// client (nil: every request goes over HTTP). Like the HTTP client, the
// Fetcher is shared with clones. Safe for concurrent use; a request already
// downloading keeps the Fetcher it started with.
func (c *Collector) SetFetcher(f Fetcher) {
	h := &c.shared.fetchers
	h.mu.Lock()
	h.current = f
	h.mu.Unlock()
}

// fetcherHub holds a collector family's Fetcher and the crawl runs using it,
// so that the Fetcher is told to idle when the last of them stops.
type fetcherHub struct {
	// mu guards current and runs; Idle is called under it, so that no run
	// starts using a Fetcher while it idles.
	mu      sync.Mutex
	current Fetcher
	runs    map[*run]Fetcher
}

// selected returns the Fetcher that takes req (ok false: HTTP takes it). A
// panic in Selects fails the request.
func (h *fetcherHub) selected(req *Request) (f Fetcher, ok bool, err error) {
	if req.Method != http.MethodGet {
		return nil, false, nil
	}
	h.mu.Lock()
	f = h.current
	h.mu.Unlock()
	if f == nil {
		return nil, false, nil
	}
	defer func() {
		if v := recover(); v != nil {
			f, ok, err = nil, false, &CallbackPanicError{Callback: "Selects", Value: v, Stack: debug.Stack()}
		}
	}()
	return f, f.Selects(req), nil
}

// use records that r uses f; the first use makes r tell the hub when it stops.
func (h *fetcherHub) use(r *run, f Fetcher) {
	if r == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.runs[r]; ok {
		return
	}
	if h.runs == nil {
		h.runs = make(map[*run]Fetcher)
	}
	// The hook runs once r's download workers have all exited: no Fetch
	// of r is running or can start.
	if r.sched.AfterStop(func() { h.stopped(r) }) {
		h.runs[r] = f
	}
}

// stopped forgets r and idles its Fetcher unless another run still uses it.
func (h *fetcherHub) stopped(r *run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.runs[r]
	if !ok {
		return
	}
	delete(h.runs, r)
	for _, other := range h.runs {
		if other == f {
			return
		}
	}
	if i, ok := f.(Idler); ok {
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.c.logger.Error("fetcher Idle panicked", "err", fmt.Sprint(v))
				}
			}()
			i.Idle()
		}()
	}
}

// send performs the exchange of req: through the Fetcher that selects it,
// or over HTTP.
func (c *Collector) send(ctx context.Context, cfg *config, req *Request) (*fetched, error) {
	f, ok, err := c.shared.fetchers.selected(req)
	if err != nil {
		return &fetched{}, err
	}
	if ok {
		return c.fetchWith(ctx, cfg, req, f)
	}
	return c.roundTrip(ctx, cfg, req, req.Method)
}

// fetchWith downloads req with f: the jar's cookies go in, the result's
// cookies come back to the jar, and the result becomes a fetched response.
func (c *Collector) fetchWith(ctx context.Context, cfg *config, req *Request, f Fetcher) (*fetched, error) {
	c.shared.fetchers.use(req.run, f)
	u := *req.URL
	hdr := req.Headers.Clone()
	c.shared.creds.strip(req.URL, hdr)
	if _, ok := hdr["User-Agent"]; !ok {
		hdr.Set("User-Agent", cfg.userAgent)
	}
	jar := c.shared.backend.get().Jar
	fr := &FetchRequest{URL: &u, Method: http.MethodGet, Header: hdr, RequestID: req.ID, sent: req.ticket.Sent}
	if jar != nil {
		fr.Cookies = jar.Cookies(req.URL)
	}
	start := time.Now()
	res, err := callFetch(ctx, f, fr)
	// A Fetcher that did not report is taken to have reached the server by
	// its return (only the first report counts).
	req.ticket.Sent(time.Now())
	out := &fetched{latency: time.Since(start)}
	if err == nil && (res == nil || res.StatusCode < 100) {
		err = ErrInvalidFetchResult
	}
	if err != nil {
		if c.debugEnabled() {
			c.logger.Debug("fetcher failed", "url", u.Redacted(), "request_id", req.ID, "duration", out.latency, "err", err)
		}
		if c.debugging() {
			c.emit(evFetch, req, map[string]string{"url": u.Redacted(), "duration": out.latency.String(), "error": err.Error()})
		}
		return out, err
	}
	c.archiveFetched(fr, res, start)
	final := res.FinalURL
	if final == nil {
		final = &u
	}
	if jar != nil && len(res.Cookies) > 0 {
		jar.SetCookies(final, res.Cookies)
	}
	h := res.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	h.Del("Content-Encoding")
	h.Del("Content-Length")
	out.status = res.StatusCode
	out.statusText = strconv.Itoa(res.StatusCode) + " " + http.StatusText(res.StatusCode)
	out.header = h
	out.body = io.NopCloser(bytes.NewReader(res.Body))
	out.finalURL = final
	if c.debugEnabled() {
		c.logger.Debug("fetched by fetcher", "url", final.Redacted(), "request_id", req.ID, "status", res.StatusCode,
			"duration", out.latency)
	}
	if c.debugging() {
		c.emit(evFetch, req, map[string]string{"url": final.Redacted(), "status": strconv.Itoa(res.StatusCode),
			"duration": out.latency.String()})
	}
	return out, nil
}

// callFetch calls f.Fetch, turning a panic into an error.
func callFetch(ctx context.Context, f Fetcher, fr *FetchRequest) (res *FetchResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, &CallbackPanicError{Callback: "Fetch", Value: v, Stack: debug.Stack()}
		}
	}()
	return f.Fetch(ctx, fr)
}
