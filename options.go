package magpie

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// CollectorOption sets one setting of a Collector; pass options to NewCollector.
type CollectorOption func(*Collector)

// UserAgent sets the User-Agent sent with requests that do not set their own.
func UserAgent(ua string) CollectorOption {
	return func(c *Collector) { c.UserAgent = ua }
}

// Headers sets default headers copied into every request made without
// explicit headers. A "Host" entry sets Request.Host.
func Headers(headers map[string]string) CollectorOption {
	return func(c *Collector) {
		h := http.Header{}
		for k, v := range headers {
			h.Set(k, v)
		}
		c.Headers = &h
	}
}

// MaxDepth refuses requests deeper than depth with ErrMaxDepth (0: no limit).
// c.Visit makes depth-1 requests; Request.Visit and each redirect hop add one.
func MaxDepth(depth int) CollectorOption {
	return func(c *Collector) { c.MaxDepth = depth }
}

// MaxRequests admits at most n requests (0: no limit); later ones are refused
// with ErrMaxRequests. The count is exact under concurrency.
func MaxRequests(n uint32) CollectorOption {
	return func(c *Collector) { c.MaxRequests = n }
}

// MaxRequestsPerHost admits at most n requests to each host (host:port, as
// the politeness gate keys hosts, without the scheme's default port: other
// ports are other servers); later ones are refused with
// ErrMaxRequestsPerHost (OnRefused, Stats().Refused["host_budget"]) and
// not marked visited. n == 0 means no budget; n < 0 is an error: the Visit
// or RunQueue that would start the crawl returns one wrapping
// ErrNegativeBudget. A LimitRule's MaxRequestsPerHost overrides n for the
// hosts the rule matches. So one large site or crawl trap cannot take the
// whole of a crawl of many hosts.
//
// A host's requests are counted as MaxRequests counts, and the count is
// as exact under concurrency: a request takes a slot of its host when it
// is admitted (in a queue run, when its entry is leased), given back if it
// is refused after all (already visited) or cannot be queued. Retries of a
// RetryPolicy or BusyRetries, a queue entry delivered again and redirect
// hops take none (a redirect counts for the host of the URL admitted);
// Request.Retry takes one. Once a host's budget is spent, every further
// request to it is refused so, visited or not, as with MaxRequests. A queue
// run refuses a link to such a host when it is found, and an entry for it
// when leased (acknowledged, not kept), and goes on with the other hosts,
// where a spent MaxRequests ends the run.
//
// The counts are the collector's (a clone starts its own) and live in
// memory, one small entry per host that has a budget, for the collector's
// life. A crawl resumed in a new process from a durable store (sqlitestore,
// redisstore) therefore gives each host its budget afresh: what the host's
// earlier runs fetched is not fetched again (the visited set), but it may
// take n more.
func MaxRequestsPerHost(n int) CollectorOption {
	return func(c *Collector) { c.maxPerHost = n }
}

// AllowedDomains restricts requests to these hostnames (the port is ignored;
// an entry written as host:port also matches that hostname).
func AllowedDomains(domains ...string) CollectorOption {
	return func(c *Collector) { c.AllowedDomains = domains }
}

// DisallowedDomains refuses requests to these hostnames; checked before AllowedDomains.
func DisallowedDomains(domains ...string) CollectorOption {
	return func(c *Collector) { c.DisallowedDomains = domains }
}

// DisallowedURLFilters refuses URLs that match any of filters with ErrForbiddenURL.
func DisallowedURLFilters(filters ...*regexp.Regexp) CollectorOption {
	return func(c *Collector) { c.DisallowedURLFilters = filters }
}

// URLFilters, when non-empty, admits only URLs that match one of filters;
// others are refused with ErrNoURLFiltersMatch.
func URLFilters(filters ...*regexp.Regexp) CollectorOption {
	return func(c *Collector) { c.URLFilters = filters }
}

// AllowURLRevisit turns the visited check off: the same request may be made again.
func AllowURLRevisit() CollectorOption {
	return func(c *Collector) { c.AllowURLRevisit = true }
}

// MaxBodySize caps the decoded body at size bytes (0: no limit; default
// 10 MiB). A capped body sets Response.Truncated and logs a warning.
func MaxBodySize(size int) CollectorOption {
	return func(c *Collector) { c.MaxBodySize = size }
}

// CacheDir caches GET responses as files under path ("" turns the cache off).
func CacheDir(path string) CollectorOption {
	return func(c *Collector) { c.CacheDir = path }
}

// CacheExpiration makes cached responses older than d misses (0: never expire).
func CacheExpiration(d time.Duration) CollectorOption {
	return func(c *Collector) { c.CacheExpiration = d }
}

// IgnoreRobotsTxt stops obeying robots.txt, which magpie obeys by default (Colly does not).
func IgnoreRobotsTxt() CollectorOption {
	return func(c *Collector) { c.IgnoreRobotsTxt = true }
}

// Async makes Visit admit the request and return at once; call Wait to let
// the crawl finish. Async() and Async(true) turn it on, Async(false) off.
func Async(a ...bool) CollectorOption {
	return func(c *Collector) { c.Async = len(a) == 0 || a[0] }
}

// ParseHTTPErrorResponse treats responses with status 300 and above like
// successes: OnResponse and OnHTML run, OnError does not.
func ParseHTTPErrorResponse() CollectorOption {
	return func(c *Collector) { c.ParseHTTPErrorResponse = true }
}

// DetectCharset guesses the charset of text bodies that declare none.
func DetectCharset() CollectorOption {
	return func(c *Collector) { c.DetectCharset = true }
}

// StreamHTML matches the OnHTML selectors while a page is tokenized and
// builds only the elements they match, each with what it contains, instead
// of the whole document. On a 16 KB page with one a[href] callback the
// analysis takes about two thirds of the time and 40% of the allocations
// (BenchmarkAnalyzeHTML).
//
// It applies to a page when every OnHTML selector names a tag with only
// #id, .class and [attr] tests after it, alone or in a list ("a[href]",
// "img[src]", "link[rel=next]", "div.note, h1"), no OnXML callback is
// registered, and the page's tree is the nesting of its tags as written
// (implied end tags of p, li and table cells are fine; misnested formatting
// tags, content fostered out of tables, SVG and templates are not). Any
// other page is parsed whole, as without the option; Stats counts both.
//
// Each HTMLElement's Name, Text, attributes, Index, Request and Response,
// and what ChildText, ChildTexts, ChildAttr, ChildAttrs, ForEach and
// ForEachWithBreak find under it, are what they would be without the
// option. What differs is the rest of the document: e.DOM holds only what
// was matched. An element with no matched element around it has no parent
// (one inside another match keeps its ancestors up to that one), so Parent,
// Closest, Siblings, Prev, Next and selectors that must match above it
// (such as "div a" where the div encloses e) find nothing; and the
// elements share an empty document, so what goquery matches in the whole
// document (AddSelector, IndexSelector, the selector forms of After,
// Append, Before, Prepend, ReplaceWith and Wrap) finds nothing either. A callback that walks out of its element needs the
// collector without StreamHTML.
func StreamHTML() CollectorOption {
	return func(c *Collector) { c.streamHTML = true }
}

// ReuseBody reads each page into memory the collector takes back once it is
// done with the page, and reuses it for a later page, as a bare net/http
// crawler that keeps no page does. Response.Body, and RawBody, are valid
// until the page's callbacks have returned (OnScraped last) and the items
// it emitted have passed the pipelines; the collector then sets Body to
// nil. Code that keeps the body or a part of it past that point, in a
// variable, a goroutine, a channel or an item's value, copies it first
// (bytes.Clone, or string(r.Body)). What the collector gives out as strings
// (e.Text, e.Attr, e.ChildText, ...) are copies already. Body's capacity
// is its length: the rest of the buffer, which held earlier pages, is out
// of reach.
//
// Without it a body's buffer is reused too, but only once a collection has
// found that nothing reaches it, which holds up to 8 MB of dead bodies for
// reuse; with it the buffer goes back as soon as the page is done: the
// same pages per second, less peak memory (bench/RESULTS.md).
func ReuseBody() CollectorOption {
	return func(c *Collector) { c.reuseBody = true }
}

// CheckHead makes each GET preceded by a HEAD; the GET is made only if the HEAD succeeds.
func CheckHead() CollectorOption {
	return func(c *Collector) { c.CheckHead = true }
}

// TraceHTTP fills Response.Trace with connection timings.
func TraceHTTP() CollectorOption {
	return func(c *Collector) { c.TraceHTTP = true }
}

// StdlibContext sets the context every fetch runs under. Once it is done
// the crawl stops as at Stop, however long its hosts' Delay: no request
// starts any more; those in flight fail with its error (context.Canceled, or
// context.DeadlineExceeded for a deadline), once each, to OnError, and are
// never retried; those not yet sent are no failures: no OnError call hears
// of them, Stats.NotStarted counts them, and a sync Visit whose own request
// was never sent returns an error that errors.Is both ErrStopped and the
// context's error. Wait and Visit return within about StopGrace. A queue run
// (RunQueue, queue.Run) stops when it is done, as when its own context
// ends: the entries of the requests it did not finish go back to the queue,
// not acknowledged, and RunQueue returns an error wrapping its error.
func StdlibContext(ctx context.Context) CollectorOption {
	return func(c *Collector) { c.Context = ctx }
}

// ID sets the collector's ID.
func ID(id uint32) CollectorOption {
	return func(c *Collector) { c.ID = id }
}

// Logger sets the logger for the crawl lifecycle (silent by default).
func Logger(l *slog.Logger) CollectorOption {
	return func(c *Collector) {
		if l != nil {
			c.logger = l
		}
	}
}

// SharedLimits makes the LimitRules hold across several crawler processes
// (on one machine or many) that crawl the same hosts: before each request
// to a host with a per-host limit, the collector asks s, which keeps the
// hosts' next start and requests in flight for all processes (for example
// redisstore's Store.HostLimiter, given to every process of the crawl).
// Each process still needs the same rules (c.Limit). Hosts without a limit
// never reach s. When s fails, that host waits limits.SharedBackoff and the
// error is logged at Warn; other hosts go on. Shared with clones; nil turns
// it off.
func SharedLimits(s limits.Shared) CollectorOption {
	return func(c *Collector) {
		if s == nil {
			c.shared.limiter.SetShared(nil, nil)
			return
		}
		c.shared.limiter.SetShared(s, func(host string, err error) {
			c.logger.Warn("shared limits unavailable, host held", "host", host, "err", err)
		})
	}
}

// SortQueryKeys makes the visited key sort query parameters, so that ?a=1&b=2
// and ?b=2&a=1 count as one URL. Off by default: some sites give order meaning.
func SortQueryKeys() CollectorOption {
	return func(c *Collector) { c.SortQuery = true }
}

// MaxParked bounds how many requests may wait in the politeness gate for
// their host's turn (default: 4 per download worker, counting MaxWorkers
// when the pool follows the limits, and at least 256; in a queue run at
// least QueueLookahead). Parked
// requests hold no worker; when the gate is full, requests stay in the
// frontier (or the queue storage) until one leaves, so memory stays bounded
// when one slow host dominates the crawl. A crawl of many hosts gets room
// for limits.ParkedPerHost more per host past the first, so that every
// host has a request waiting when its turn comes. n <= 0 keeps the default.
func MaxParked(n int) CollectorOption {
	return func(c *Collector) {
		if n > 0 {
			c.maxParked = n
		}
	}
}

// QueueLookahead caps how many queue entries a queue run (queue.Run,
// RunQueue) holds leased and unfinished.
//
// Over a queue that leases by host (storage.HostQueue: the in-memory
// queue, sqlitestore and redisstore), the storage hands out only entries
// whose host may start within a second and holds few of them leased (twice
// the most requests in flight the limits allow a host), so every entry in
// hand is one its host starts soon and no look-ahead is guessed: the cap
// is only a guard on memory, 65,536 by default, n when set.
//
// Over a FIFO queue (a Colly queue storage), the default cap is
// DefaultQueueLookahead (512), or 32 for each host with entries in hand
// when that is more, up to 65,536: a crawl of thousands of hosts with a
// Delay must lease far past the head of the queue to keep them all
// started. Set, the cap is n, fixed. Without look-ahead, the entries at
// the head of the queue, all for a few hosts waiting out their Delay,
// would leave the other hosts idle; with it the run leases on while the
// entries it finds are for hosts that have too little work, and stops once
// they keep finding hosts that have enough (a frontier dominated by one
// host holds about 4 entries per thread; a consumer sharing a queue with
// others takes no more than it can start soon), until a request finishes
// or 100 ms pass with none finished (the requests in hand may all be
// waiting out a long Delay). The look-ahead beyond 2 per thread needs a
// queue storage that renews leases (storage.LeaseRenewer).
//
// Held entries are renewed every third of their lease, so none expires
// while it waits. n <= 0 keeps the default.
func QueueLookahead(n int) CollectorOption {
	return func(c *Collector) {
		if n > 0 {
			c.queueLookahead = n
		}
	}
}

// Workers fixes how many downloads run at once for Visit and Wait. Without
// it the pool follows the LimitRules: as many downloads as the hosts with
// work allow (the sum of their Parallelism, within each rule's
// TotalParallelism; DefaultHostParallelism for a host no rule limits), up to
// MaxWorkers, so a Colly program's LimitRule{Parallelism: 64} gets 64 in
// flight. With Workers(n) a host no rule limits may take all n. Per-host
// politeness is set with Limit; queue.Run uses its own thread count.
func Workers(n int) CollectorOption {
	return func(c *Collector) {
		if n > 0 {
			c.workers = n
		}
	}
}

// RetryPolicy turns automatic retries on (off by default, as in Colly).
func RetryPolicy(p RetryOptions) CollectorOption {
	return func(c *Collector) {
		p = p.withDefaults()
		c.retry = &p
	}
}

// DefaultMaxPending is the most requests an in-memory crawl (Visit and
// Wait, no queue) holds admitted and not finished when MaxPending does not
// set it: about 1 GB at the 800-900 bytes a pending link takes.
const DefaultMaxPending = 1_000_000

// MaxPending bounds the requests an in-memory crawl holds admitted and not
// finished (waiting in the frontier, parked for their host, in flight) at
// n, so that a crawl whose pages yield links faster than it fetches them
// cannot take all the memory there is. Past it a Visit is refused with
// ErrFrontierFull (OnRefused, Stats().Refused["frontier_full"]) and the
// link is not marked visited; retries of requests already held are never
// refused. n == 0 keeps DefaultMaxPending; n < 0 removes the bound. A
// queue run (queue.Run, RunQueue) keeps its pending requests in its queue
// storage instead, bounded by the storage's MaxSize.
func MaxPending(n int) CollectorOption {
	return func(c *Collector) { c.maxPending = n }
}

// pendingBound is the in-memory frontier's bound for n as MaxPending
// takes it (0: no bound).
func pendingBound(n int) int {
	switch {
	case n == 0:
		return DefaultMaxPending
	case n < 0:
		return 0
	}
	return n
}

// DefaultStopGrace is how long Stop, and the end of RunQueue's context, wait
// for work in progress unless StopGrace says otherwise.
const DefaultStopGrace = time.Second

// StopGrace sets how long Stop, and the end of RunQueue's (queue.RunContext's)
// context, wait for work in progress (default DefaultStopGrace, 1 s). First
// nothing new starts, and the downloads in flight get up to d to be answered
// and their callbacks to run, so that a request the server has already read
// is finished rather than fetched again. Then the rest is cancelled, and a
// callback still running d later (one that never returns) is abandoned: Stop
// or RunQueue returns a *CallbackStuckError naming it (errors.Is
// ErrCallbackStuck) and its request is released, not lost. So Stop returns
// within about 2·d whatever callbacks do. d <= 0 keeps the default.
func StopGrace(d time.Duration) CollectorOption {
	return func(c *Collector) {
		if d > 0 {
			c.stopGrace = d
		}
	}
}

// BusyRetries sets how many times a request is sent again when the server
// answers "come back later": 429 Too Many Requests, or 503 Service
// Unavailable with Retry-After (default DefaultBusyRetries, 5; n <= 0 turns
// it off). This is on by default and independent of RetryPolicy, which
// stays off for other errors: the retry waits in the frontier, holding no
// worker, for the Retry-After and the host's hold (the limiter holds a host
// after each 429 or 503, with a growing back-off), and each is counted in
// Stats().BusyRetries. When a RetryPolicy lists the status, the policy
// alone decides. After the last retry the answer reaches OnError as a
// *RetryError.
func BusyRetries(n int) CollectorOption {
	return func(c *Collector) {
		if n <= 0 {
			n = -1
		}
		c.busyRetries = n
	}
}

// MaxRetryAfter bounds how long a request waits for a server's
// Retry-After. A response whose Retry-After is longer than d, which
// BusyRetries or the RetryPolicy would retry, is not retried: it reaches
// OnError at once with an error that wraps ErrRetryAfterTooLong and the
// response's *HTTPError (so errors.Is and errors.As find both), and its
// host is held for d, not for the whole Retry-After. A Retry-After up to d
// is waited for as usual. d <= 0, the default, sets no bound: a
// Retry-After is honoured up to the limiter's MaxHold
// (limits.DefaultMaxHold, 10 minutes). Stats().Waits lists the requests
// waiting meanwhile.
func MaxRetryAfter(d time.Duration) CollectorOption {
	return func(c *Collector) { c.maxRetryAfter = max(d, 0) }
}
