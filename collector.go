package magpie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"

	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/storage"
)

// LimitRule is Colly's per-host politeness rule, an alias of limits.Rule
// (see its documentation, and the limits package's, for every field and how
// they combine). Add one with Collector.Limit; the first rule whose pattern
// matches a host applies to it:
//
//	DomainGlob       hosts by glob ("*.example.com"; '*' crosses dots, as Colly's)
//	DomainRegexp     hosts by regular expression (unanchored)
//	Delay            least time between two request starts to one host, as the server sees them
//	RandomDelay      a uniform extra delay in [0, RandomDelay)
//	Parallelism      most requests in flight to each host (Colly: to all matching hosts together);
//	                 <= 0 is 1 with a delay, no limit without
//	TotalParallelism most requests in flight to all matching hosts together
//	IgnoreCrawlDelay robots.txt Crawl-delay does not raise Delay
//	AutoThrottle     adapt each host's delay to its latency
//
// A host's robots.txt fetch is one of its requests: it takes its place in
// the host's Delay and Parallelism. Set the fields before Limit and do not
// change them afterwards.
type LimitRule = limits.Rule

// defaultUserAgent is sent when neither the collector nor the request sets one.
const defaultUserAgent = "magpie - https://github.com/magpiecrawl/magpie"

// robotsTTL is how long a parsed robots.txt is trusted.
const robotsTTL = time.Hour

// Collector is a crawler: options, callbacks and the engine that runs them.
// Create it with NewCollector; the zero value is not usable.
//
// The exported fields may be set after construction; they are read when a
// crawl (a run of the engine) starts, so changing them while a crawl runs has
// no effect until the next one. Every method is safe for concurrent use.
type Collector struct {
	// UserAgent is sent with requests that set no User-Agent header.
	UserAgent string
	// Headers are copied into requests made without explicit headers.
	Headers *http.Header
	// MaxDepth is the deepest request admitted (0: no limit).
	MaxDepth int
	// MaxRequests is the most requests admitted (0: no limit).
	MaxRequests uint32
	// AllowedDomains, when non-empty, are the only hostnames admitted.
	AllowedDomains []string
	// DisallowedDomains are hostnames never admitted.
	DisallowedDomains []string
	// DisallowedURLFilters refuse matching URLs.
	DisallowedURLFilters []*regexp.Regexp
	// URLFilters, when non-empty, admit only matching URLs.
	URLFilters []*regexp.Regexp
	// AllowURLRevisit turns the visited check off.
	AllowURLRevisit bool
	// MaxBodySize caps the decoded body in bytes (0: no limit).
	MaxBodySize int
	// CacheDir, when set, caches GET responses there.
	CacheDir string
	// CacheExpiration is the age after which a cached response is refetched (0: never).
	CacheExpiration time.Duration
	// IgnoreRobotsTxt turns robots.txt checks off (they are on by default).
	IgnoreRobotsTxt bool
	// Async makes Visit return at once; Wait lets the crawl finish.
	Async bool
	// ParseHTTPErrorResponse runs the success callbacks for status >= 300 too.
	ParseHTTPErrorResponse bool
	// ID identifies the collector.
	ID uint32
	// DetectCharset guesses the charset of bodies that declare none.
	DetectCharset bool
	// CheckHead precedes each GET with a HEAD.
	CheckHead bool
	// TraceHTTP fills Response.Trace.
	TraceHTTP bool
	// Context is the context every fetch runs under.
	Context context.Context
	// SortQuery sorts query parameters in visited keys.
	SortQuery bool

	// sitemapsFromRobots and sitemapSince are set by SitemapsFromRobots
	// and SitemapModifiedSince.
	sitemapsFromRobots bool
	sitemapSince       time.Time

	logger    *slog.Logger
	workers   int
	maxParked int
	// queueLookahead is QueueLookahead's cap (0: the default).
	queueLookahead int
	retry          *RetryOptions
	// maxPending is MaxPending's n (0: DefaultMaxPending).
	maxPending int
	// stopGrace is StopGrace's period (0: DefaultStopGrace); busyRetries
	// is BusyRetries' bound (0: DefaultBusyRetries, < 0: none).
	stopGrace   time.Duration
	busyRetries int

	// shared is what clones share: HTTP backend, limits, storage, robots.
	shared *shared

	// cbMu serialises changes to cbs; readers load cbs without it.
	cbMu sync.Mutex
	// cbs holds the callback lists; see snapshotCallbacks.
	cbs atomic.Pointer[callbacks]

	// runMu guards run and stopping.
	runMu sync.Mutex
	run   *run
	// stopping are runs that Stop, called from their own callbacks, left
	// shutting down; Wait waits for them.
	stopping []*run
	// debugger is the attached debug.Debugger, if any.
	debugger atomic.Pointer[debuggerRef]
	// refusals counts refusals by reason (see Stats.Refused).
	refusals refusalCounts
	// counts are the rest of Stats' counters.
	counts counters
	// progressEvery is ProgressInterval's period (0: no progress line).
	progressEvery time.Duration
	itemState
	// inCallback holds the goroutine IDs currently running this collector's
	// callbacks (sync mode only), so that a Visit from a callback does not wait.
	inCallback sync.Map
	// serial makes a sync collector's callbacks take turns (callbacks.go).
	serial serialCallbacks
	// goexits maps a goroutine ID to the callback that called
	// runtime.Goexit on it, for the engine's report (see safely).
	goexits sync.Map

	requestCount  atomic.Uint32
	responseCount atomic.Uint32
	nextID        atomic.Uint32
	// visitMu serialises IsVisited+Visited for stores without VisitedSet.
	visitMu *sync.Mutex
}

// shared is the state a Collector shares with its clones.
type shared struct {
	backend *httpBackend
	limiter *limits.Limiter
	robots  *robotsCache
	// storeMu guards store.
	storeMu sync.RWMutex
	store   storage.Storage
	// redirectMu guards redirectHandler.
	redirectMu      sync.RWMutex
	redirectHandler func(req *http.Request, via []*http.Request) error
	// creds are the hosts the user's credential headers may go to.
	creds credentialScope
	// fetchers holds the Fetcher (SetFetcher) and the runs using it.
	fetchers fetcherHub
}

var collectorIDs atomic.Uint32

// NewCollector returns a Collector with Colly's defaults except that
// robots.txt is obeyed, then applies options in order.
func NewCollector(options ...CollectorOption) *Collector {
	c := &Collector{}
	c.Init()
	for _, o := range options {
		o(c)
	}
	return c
}

// Clone returns a collector with the same settings that shares the HTTP
// client, limit rules, storage, robots cache and visited set, but has no
// callbacks and runs its own crawls (Wait on it separately).
func (c *Collector) Clone() *Collector {
	n := &Collector{
		UserAgent:              c.UserAgent,
		MaxDepth:               c.MaxDepth,
		MaxRequests:            c.MaxRequests,
		AllowedDomains:         c.AllowedDomains,
		DisallowedDomains:      c.DisallowedDomains,
		DisallowedURLFilters:   c.DisallowedURLFilters,
		URLFilters:             c.URLFilters,
		AllowURLRevisit:        c.AllowURLRevisit,
		MaxBodySize:            c.MaxBodySize,
		CacheDir:               c.CacheDir,
		CacheExpiration:        c.CacheExpiration,
		IgnoreRobotsTxt:        c.IgnoreRobotsTxt,
		Async:                  c.Async,
		ParseHTTPErrorResponse: c.ParseHTTPErrorResponse,
		ID:                     collectorIDs.Add(1),
		DetectCharset:          c.DetectCharset,
		CheckHead:              c.CheckHead,
		TraceHTTP:              c.TraceHTTP,
		Context:                c.Context,
		SortQuery:              c.SortQuery,
		logger:                 c.logger,
		workers:                c.workers,
		maxParked:              c.maxParked,
		queueLookahead:         c.queueLookahead,
		maxPending:             c.maxPending,
		retry:                  c.retry,
		stopGrace:              c.stopGrace,
		busyRetries:            c.busyRetries,
		sitemapsFromRobots:     c.sitemapsFromRobots,
		sitemapSince:           c.sitemapSince,
		progressEvery:          c.progressEvery,
		shared:                 c.shared,
		visitMu:                c.visitMu,
	}
	n.debugger.Store(c.debugger.Load())
	n.serial.off.Store(c.serial.off.Load())
	if c.Headers != nil {
		h := c.Headers.Clone()
		n.Headers = &h
	}
	return n
}

// Limit adds a politeness rule; the rules are shared with clones.
func (c *Collector) Limit(rule *LimitRule) error { return c.shared.limiter.Add(rule) }

// Limits adds several politeness rules, all or none.
func (c *Collector) Limits(rules []*LimitRule) error { return c.shared.limiter.Add(rules...) }

// SetStorage replaces the visited set and cookie store (shared with clones)
// after calling its Init. Cookies then live in s.
func (c *Collector) SetStorage(s storage.Storage) error {
	if err := s.Init(); err != nil {
		return err
	}
	c.shared.storeMu.Lock()
	c.shared.store = s
	c.shared.storeMu.Unlock()
	c.shared.backend.setJar(&storageJar{store: s, logger: c.logger})
	return nil
}

func (c *Collector) storage() storage.Storage {
	c.shared.storeMu.RLock()
	defer c.shared.storeMu.RUnlock()
	return c.shared.store
}

// SetRedirectHandler sets a function that decides on each redirect after
// magpie's own checks passed; it works like http.Client.CheckRedirect.
func (c *Collector) SetRedirectHandler(f func(req *http.Request, via []*http.Request) error) {
	c.shared.redirectMu.Lock()
	c.shared.redirectHandler = f
	c.shared.redirectMu.Unlock()
}

// Visit fetches u (GET, depth 1). In sync mode it returns when the crawl it
// started is done, with the request's own error; from inside a callback, and
// in async mode, it returns once the request is admitted.
func (c *Collector) Visit(u string) error {
	return c.scrape(u, http.MethodGet, 1, nil, nil, nil, true)
}

// Head makes a HEAD request to u; HEAD requests skip the visited check.
func (c *Collector) Head(u string) error {
	return c.scrape(u, http.MethodHead, 1, nil, nil, nil, false)
}

// Post makes a form POST of data to u.
func (c *Collector) Post(u string, data map[string]string) error {
	return c.scrape(u, http.MethodPost, 1, formReader(data), nil, nil, true)
}

// PostRaw makes a POST of data to u.
func (c *Collector) PostRaw(u string, data []byte) error {
	return c.scrape(u, http.MethodPost, 1, bytes.NewReader(data), nil, nil, true)
}

// PostMultipart makes a multipart/form-data POST of parts to u.
func (c *Collector) PostMultipart(u string, parts map[string][]byte) error {
	body, ct, err := multipartBody(parts)
	if err != nil {
		return err
	}
	h := c.defaultHeaders()
	h.Set("Content-Type", ct)
	return c.scrape(u, http.MethodPost, 1, bytes.NewReader(body), nil, h, true)
}

// Request makes a request with any method. A nil ctx gets a new Context, a
// nil hdr the collector's Headers.
func (c *Collector) Request(method, u string, body io.Reader, ctx *Context, hdr http.Header) error {
	return c.scrape(u, method, 1, body, ctx, hdr, true)
}

// HasVisited reports whether a GET of u has been admitted.
func (c *Collector) HasVisited(u string) (bool, error) {
	return c.checkVisited(http.MethodGet, u, nil)
}

// HasPosted reports whether a form POST of data to u has been admitted.
func (c *Collector) HasPosted(u string, data map[string]string) (bool, error) {
	b, _ := io.ReadAll(formReader(data))
	return c.checkVisited(http.MethodPost, u, b)
}

func (c *Collector) checkVisited(method, u string, body []byte) (bool, error) {
	p, err := url.Parse(u)
	if err != nil {
		return false, err
	}
	return c.storage().IsVisited(requestKey(method, canonicalURL(p, c.SortQuery), body))
}

// UnmarshalRequest rebuilds a Request from Request.Marshal's output. The
// request gets a new ID and belongs to c.
func (c *Collector) UnmarshalRequest(data []byte) (*Request, error) {
	return c.unmarshalRequest(data)
}

// String reports counters, as Colly does.
func (c *Collector) String() string {
	n := c.snapshotCallbacks().count()
	return fmt.Sprintf("Requests made: %d (%d responses) | Callbacks: OnRequest: %d, OnHTML: %d, OnResponse: %d, OnError: %d",
		c.requestCount.Load(), c.responseCount.Load(), n.request, n.html, n.response, n.err)
}

func (c *Collector) defaultHeaders() http.Header {
	if c.Headers == nil {
		return http.Header{}
	}
	return c.Headers.Clone()
}

// scrape builds a request and admits it; it is the one entry of every
// request into a crawl.
func (c *Collector) scrape(u, method string, depth int, body io.Reader, ctx *Context, hdr http.Header, checkRevisit bool) error {
	req, err := c.newRequest(u, method, depth, body, ctx, hdr)
	if err != nil {
		req.err = err
		c.refuse(req, err)
		return err
	}
	req.checkRevisit = checkRevisit
	return c.submit(req)
}

// newRequest builds a request; on error it still returns a request (with
// whatever could be parsed) so that OnError can be told which one failed.
func (c *Collector) newRequest(u, method string, depth int, body io.Reader, ctx *Context, hdr http.Header) (*Request, error) {
	p, err := parseURL(u)
	if err != nil {
		req, _ := c.newRequestURL(&url.URL{Path: u}, method, depth, nil, ctx, hdr)
		return req, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	return c.newRequestURL(p, method, depth, body, ctx, hdr)
}

// newRequestURL is newRequest for a parsed URL, which the request keeps.
func (c *Collector) newRequestURL(u *url.URL, method string, depth int, body io.Reader, ctx *Context, hdr http.Header) (*Request, error) {
	if ctx == nil {
		ctx = NewContext()
	}
	if hdr == nil {
		hdr = c.defaultHeaders()
	}
	req := &Request{
		URL:       u,
		Method:    method,
		Headers:   &hdr,
		Ctx:       ctx,
		Depth:     depth,
		ID:        c.nextID.Add(1),
		collector: c,
		stdCtx:    c.Context,
		attempt:   1,
	}
	if h := hdr.Get("Host"); h != "" {
		req.Host = h
	}
	if body != nil {
		b, err := io.ReadAll(body)
		if err != nil {
			return req, fmt.Errorf("reading request body: %w", err)
		}
		req.bodyBytes = b
		req.Body = bytes.NewReader(b)
	}
	return req, nil
}

// submit admits req and hands it to the running crawl. In sync mode, outside
// callbacks, it then waits for the crawl to finish.
func (c *Collector) submit(req *Request) error {
	cfg := c.config()
	if cfg.async {
		_, err := c.enter(cfg, req)
		if err != nil {
			c.logRefusal(req, err)
			c.reportRejection(req, err)
		}
		return err
	}
	// Sync mode: one goroutine-ID lookup answers both "must this Visit wait
	// for the crawl?" and "must OnError of a refusal be marked as a callback?".
	id := goroutineID()
	_, nested := c.inCallback.Load(id)
	r, err := c.enter(cfg, req)
	if err != nil {
		c.logRefusal(req, err)
		req.regionGID.Store(id) // its refusal's callbacks run on this goroutine
		if nested {
			c.reportRejection(req, err)
		} else {
			c.withCallbackMarkID(id, func() { c.reportRejection(req, err) })
		}
		return err
	}
	if nested {
		return nil
	}
	c.waitRun(r)
	return req.finalErr()
}

// submitChild admits a request made by Request.Visit and its kin, which never
// wait for the crawl. Such calls come from callbacks, whose goroutine is
// already marked in sync mode, so no goroutine-ID lookup is needed: this is
// the hot path of a crawl (every link of every page passes here).
func (c *Collector) submitChild(req *Request) error {
	cfg := c.config()
	// A link belongs to its parent's run: a queue run's storage takes it even
	// while the run stops, and it is admitted for good when leased.
	if req.parentRun != nil {
		cfg = req.parentRun.cfg
		req.deferMark = req.parentRun.queueMode
	}
	_, err := c.enter(cfg, req)
	if err != nil {
		c.logRefusal(req, err)
		if req.deferMark && errors.Is(err, ErrStorageUnavailable) {
			// The outage reached OnError when it began, and the link is not
			// lost: its parent's entry goes back to the queue.
			return err
		}
		c.reportRejection(req, err)
	}
	return err
}

// enter admits req and queues it; on failure nothing of the admission is left
// and req.err holds the error.
func (c *Collector) enter(cfg *config, req *Request) (*run, error) {
	if err := c.admit(req.stdContext(), cfg, req); err != nil {
		req.err = err
		return nil, err
	}
	r, err := c.enqueue(req, req.robotsWait)
	if err != nil {
		c.unadmit(req)
		req.err = err
		return nil, err
	}
	return r, nil
}

// refuse delivers a refusal to OnRefused (a failure such as a storage error
// to OnError); in sync mode the callbacks run marked as callbacks, so that a
// Visit from them does not wait for the crawl.
func (c *Collector) refuse(req *Request, err error) {
	c.logRefusal(req, err)
	if c.config().async {
		c.reportRejection(req, err)
		return
	}
	c.withCallbackMark(func() { c.reportRejection(req, err) })
}

func (c *Collector) logRefusal(req *Request, err error) {
	if !c.debugEnabled() {
		return
	}
	c.logger.Debug("request refused", "url", req.URL.Redacted(), "method", req.Method, "depth", req.Depth, "request_id", req.ID, "err", err)
}

// debugEnabled guards Debug calls on hot paths, whose attributes (URL
// strings) would otherwise be built for a logger that drops them.
func (c *Collector) debugEnabled() bool {
	return c.logger.Enabled(context.Background(), slog.LevelDebug)
}

// analyze is the analysis stage of one response: OnError, or OnResponse,
// OnHTML, OnXML and OnScraped; then the request is finished. Children that
// callbacks admit are counted before their parent finishes, so the crawl
// cannot look idle in between.
func (c *Collector) analyze(r *run, resp *Response) []item {
	req := resp.Request
	if resp.aborted {
		r.finish(req, nil)
		return nil
	}
	if resp.err != nil {
		if pending, ok := errors.AsType[*robotsPendingError](resp.err); ok && r.waitRobots(resp, pending.Until) {
			return nil
		}
		if rf, ok := errors.AsType[*refusedInFetch](resp.err); ok {
			c.reportRejection(req, rf.err)
			r.finish(req, rf.err)
			return nil
		}
		if r.maybeRetry(resp) {
			return nil
		}
		err := resp.err
		if req.attempt > 1 {
			err = &RetryError{Attempts: req.attempt, Err: err}
		}
		if c.debugEnabled() {
			c.logger.Debug("request failed", "url", req.URL.Redacted(), "method", req.Method, "status", resp.StatusCode, "request_id", req.ID, "err", err)
		}
		c.handleOnError(resp, err)
		r.finish(req, err)
		return nil
	}
	if c.debugEnabled() {
		c.logger.Debug("response", "url", req.URL.Redacted(), "method", req.Method, "status", resp.StatusCode, "depth", req.Depth, "request_id", req.ID)
	}
	if req.sitemap {
		r.finish(req, c.readSitemap(r.cfg, resp))
		return nil
	}
	err := c.runResponseCallbacks(resp)
	if values := resp.takeItems(); len(values) > 0 {
		// The page finishes when its items are through the pipelines.
		return r.holdForItems(resp, err, values)
	}
	r.finish(req, err)
	return nil
}

// runResponseCallbacks runs OnResponse, OnHTML, OnXML and OnScraped for a
// successful response. Every error goes to OnError; the first is returned.
func (c *Collector) runResponseCallbacks(resp *Response) error {
	cbs := c.snapshotCallbacks()
	var firstErr error
	report := func(err error) {
		if err == nil {
			return
		}
		if firstErr == nil {
			firstErr = err
		}
		c.handleOnError(resp, err)
	}
	if c.debugging() {
		c.emit(evResponse, resp.Request, responseValues(resp, nil))
	}
	for _, f := range cbs.response {
		report(c.safelyAt(resp.Request, &labelOnResponse, func() { f(resp) }))
	}
	c.runDocumentCallbacks(cbs, resp, report)
	if c.debugging() {
		c.emit(evScraped, resp.Request, map[string]string{"url": logURL(resp.Request)})
	}
	for _, f := range cbs.scraped {
		report(c.safelyAt(resp.Request, &labelOnScraped, func() { f(resp) }))
	}
	if slices.ContainsFunc(cbs.html, func(cb *htmlCallback) bool { return cb.detached.Load() }) ||
		slices.ContainsFunc(cbs.xml, func(cb *xmlCallback) bool { return cb.detached.Load() }) {
		c.purgeDetached()
	}
	return firstErr
}

// baseHrefMatcher finds the <base href> that relative links resolve against;
// compiled once, as goquery's Find would compile it for every page.
var baseHrefMatcher = cascadia.MustCompile("base[href]")

// runDocumentCallbacks runs OnHTML and OnXML. An HTML body is parsed once and
// shared by goquery and htmlquery; XML bodies go to xmlquery.
func (c *Collector) runDocumentCallbacks(cbs *callbacks, resp *Response, report func(error)) {
	if len(cbs.html) == 0 && len(cbs.xml) == 0 {
		return
	}
	ct := ""
	if resp.Headers != nil {
		ct = strings.ToLower(resp.Headers.Get("Content-Type"))
	}
	if ct == "" {
		ct = http.DetectContentType(resp.Body)
	}
	req := resp.Request
	path := strings.ToLower(req.URL.Path)
	isHTML := strings.Contains(ct, "text/html") || strings.Contains(ct, "application/xhtml+xml")
	isXML := !isHTML && (strings.Contains(ct, "xml") || strings.HasSuffix(path, ".xml") || strings.HasSuffix(path, ".xml.gz"))
	switch {
	case isHTML:
		root, err := html.Parse(bytes.NewReader(resp.Body))
		if err != nil {
			// x/net/html refuses more than 512 open elements; browsers
			// render such pages, so parse them again flattened.
			root, err = html.Parse(bytes.NewReader(flattenHTML(resp.Body, maxHTMLNesting)))
			resp.Flattened = err == nil
		}
		if err != nil {
			report(fmt.Errorf("parsing HTML: %w", err))
			return
		}
		doc := goquery.NewDocumentFromNode(root)
		if base := cascadia.Query(root, baseHrefMatcher); base != nil {
			href, _ := attrOf(base.Attr, "href")
			// Resolved as a browser does: the WHATWG parser drops tabs and
			// newlines inside the href, which net/url refuses.
			if b, err := resolveRef(req.URL, strings.TrimSpace(href)); err == nil {
				req.baseURL = b
			}
		}
		for _, cb := range cbs.html {
			i := 0
			doc.FindMatcher(cb.matcher).Each(func(_ int, s *goquery.Selection) {
				for _, n := range s.Nodes {
					if cb.detached.Load() {
						return
					}
					e := NewHTMLElementFromSelectionNode(resp, s, n, i)
					if c.debugging() {
						c.emit(evHTML, req, map[string]string{"selector": cb.selector, "url": logURL(req)})
					}
					i++
					report(c.safelyAt(req, &cb.label, func() { cb.fn(e) }))
				}
			})
		}
		for _, cb := range cbs.xml {
			for i, n := range htmlquery.QuerySelectorAll(root, cb.expr) {
				if cb.detached.Load() {
					break
				}
				e := NewXMLElementFromHTMLNode(resp, n)
				if c.debugging() {
					c.emit(evXML, req, map[string]string{"selector": cb.query, "url": logURL(req)})
				}
				e.Index = i
				report(c.safelyAt(req, &cb.label, func() { cb.fn(e) }))
			}
		}
	case isXML && len(cbs.xml) > 0:
		doc, err := xmlquery.Parse(bytes.NewReader(resp.Body))
		if err != nil {
			report(fmt.Errorf("parsing XML: %w", err))
			return
		}
		for _, cb := range cbs.xml {
			for i, n := range xmlquery.QuerySelectorAll(doc, cb.expr) {
				if cb.detached.Load() {
					break
				}
				e := NewXMLElementFromXMLNode(resp, n)
				if c.debugging() {
					c.emit(evXML, req, map[string]string{"selector": cb.query, "url": logURL(req)})
				}
				e.Index = i
				report(c.safelyAt(req, &cb.label, func() { cb.fn(e) }))
			}
		}
	}
}
