package magpie

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/internal/urlkey"
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
//	PolitenessBy     which hosts share all of the above: each host:port (default), each
//	                 registrable domain, or each address the names resolve to (see PolitenessBy)
//
// MaxRequestsPerHost, when positive, is the budget of each matching host:
// it overrides the MaxRequestsPerHost option for them.
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

	// settings are the unexported knobs the options set (config.go).
	settings

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
	itemState
	// marks tells a call from this collector's callbacks (callbacks.go).
	marks callbackMarks
	// inCallback holds the goroutine IDs running this collector's callbacks
	// when it found no marker frame free (see callbackMarks).
	inCallback sync.Map
	// serial makes a sync collector's callbacks take turns (callbacks.go).
	serial serialCallbacks
	// goexits maps a goroutine ID to the callback that called
	// runtime.Goexit on it, for the engine's report (see safely).
	goexits sync.Map

	// budgets are the MaxRequestsPerHost counts (admit.go).
	budgets hostBudgets
	// steer is the pause and the blocked hosts (steer.go).
	steer steering
	// watch is the latest failures and the hosts' totals (watch.go).
	watch watchState

	requestCount  atomic.Uint32
	responseCount atomic.Uint32
	nextID        atomic.Uint32
	// visitMu serialises IsVisited+Visited for stores without VisitedSet.
	visitMu *sync.Mutex
	// limitNotes holds the *LimitRule values noteStartSpacing has logged.
	limitNotes sync.Map
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
		settings:               c.settings,
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

// Limit adds a politeness rule; the rules are shared with clones. It
// returns ErrNoPattern for a rule with no pattern, an error wrapping
// limits.ErrBadPattern for one that does not compile, and one wrapping
// limits.ErrBadPoliteness for a PolitenessBy that is not a limits constant.
//
// In a queue run (queue.Queue.Run, RunQueue) the queue's thread count is
// the crawl's download concurrency, and a rule's Parallelism caps each host
// within it: a host has at most min(Parallelism, threads) requests in
// flight, and all the threads when no rule limits it. Workers and
// DefaultHostParallelism size Visit and Wait crawls only. A crawl that
// resumes passes one store to both SetStorage (the visited set and cookies)
// and queue.New (the queue): sqlitestore and redisstore serve both, so the
// visited set is kept with the queue.
//
// A rule with a Delay spaces the starts of requests to a host by it, so a
// Parallelism above 1 is reached only by requests slower than
// Parallelism × Delay; DelayPerSlot spaces each slot instead, as Colly does.
// Such a rule is noted once at Info through the Logger.
func (c *Collector) Limit(rule *LimitRule) error { return c.Limits([]*LimitRule{rule}) }

// Limits adds several politeness rules, all or none.
func (c *Collector) Limits(rules []*LimitRule) error {
	if err := c.shared.limiter.Add(rules...); err != nil {
		return err
	}
	c.pinRules(rules...)
	for _, r := range rules {
		c.noteStartSpacing(r)
	}
	return nil
}

// noteStartSpacing logs, once per collector and rule, that r spaces starts
// and will not reach its Parallelism: Colly programs moved over unchanged
// ran 8 to 10 times slower for it until DelayPerSlot was set.
func (c *Collector) noteStartSpacing(r *LimitRule) {
	if r.Parallelism <= 1 || (r.Delay <= 0 && r.RandomDelay <= 0) || r.DelayPerSlot || r.AutoThrottle != nil {
		return
	}
	if _, seen := c.limitNotes.LoadOrStore(r, struct{}{}); seen {
		return
	}
	c.logger.Info("LimitRule: Delay spaces the starts of requests to each host, so Parallelism is reached only by requests slower than Parallelism × Delay; set DelayPerSlot: true for Colly's spacing (each slot waits Delay after its own request)",
		"domain_glob", r.DomainGlob, "domain_regexp", r.DomainRegexp,
		"parallelism", r.Parallelism, "delay", r.Delay, "random_delay", r.RandomDelay)
}

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
// magpie's URL checks passed (scheme, domains, URL filters, depth) and
// before robots.txt and the visited set are consulted, so that a redirect
// it refuses costs no robots.txt fetch and marks nothing visited; it works
// like http.Client.CheckRedirect: returning http.ErrUseLastResponse stops
// there and makes the 3xx the response (to OnError, or to OnResponse with
// ParseHTTPErrorResponse), any other error fails the request with it.
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
	return c.storage().IsVisited(urlkey.RequestKey(method, urlkey.Canonical(p, c.SortQuery), body))
}

// UnmarshalRequest rebuilds a Request from Request.Marshal's output. The
// request gets a new ID and belongs to c.
func (c *Collector) UnmarshalRequest(data []byte) (*Request, error) {
	return c.unmarshalRequest(data)
}

// String reports counters, as Colly does: the requests sent and the
// responses received, the same numbers as Stats().Requests and
// Stats().Responses (a retry is one more request; so is an entry a resumed
// queue run sends), and how many callbacks of each kind are registered.
func (c *Collector) String() string {
	n := c.snapshotCallbacks().count()
	return fmt.Sprintf("Requests made: %d (%d responses) | Callbacks: OnRequest: %d, OnHTML: %d, OnResponse: %d, OnError: %d",
		uint32(c.counts.sent.Load()), c.responseCount.Load(), n.request, n.html, n.response, n.err)
}

func (c *Collector) defaultHeaders() http.Header {
	if c.Headers == nil {
		return http.Header{}
	}
	return c.Headers.Clone()
}

// debugEnabled guards Debug calls on hot paths, whose attributes (URL
// strings) would otherwise be built for a logger that drops them.
func (c *Collector) debugEnabled() bool {
	return c.logger.Enabled(context.Background(), slog.LevelDebug)
}
