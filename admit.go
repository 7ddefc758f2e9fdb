package magpie

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/magpiecrawl/magpie/storage"
)

// config is the snapshot of a Collector's exported fields that one crawl runs
// with, so that a crawl never races with a caller changing fields.
type config struct {
	userAgent          string
	maxDepth           int
	maxRequests        uint32
	allowedDomains     []string
	disallowedDomains  []string
	disallowedURLs     []*regexp.Regexp
	urlFilters         []*regexp.Regexp
	allowRevisit       bool
	maxBodySize        int
	cacheDir           string
	cacheExpiration    time.Duration
	ignoreRobots       bool
	async              bool
	parseHTTPErrors    bool
	detectCharset      bool
	checkHead          bool
	traceHTTP          bool
	sortQuery          bool
	workers            int
	maxParked          int
	queueLookahead     int
	maxPending         int // the in-memory frontier's bound; 0: none
	retry              *RetryOptions
	stopGrace          time.Duration
	busyRetries        int
	stdCtx             context.Context
	cache              *fileCache
	redirectMaxHops    int
	redirectCheckDepth bool
	sitemapsFromRobots bool
	sitemapSince       time.Time
	progressEvery      time.Duration
	// otherScheme reports whether the transport serves a scheme other than
	// http and https (a protocol registered on it, such as "file").
	otherScheme func(scheme string) bool
}

// config returns the running crawl's snapshot, or a fresh one when no crawl runs.
func (c *Collector) config() *config {
	c.runMu.Lock()
	r := c.run
	c.runMu.Unlock()
	if r != nil {
		return r.cfg
	}
	return c.snapshot()
}

func (c *Collector) snapshot() *config {
	cfg := &config{
		userAgent:          c.UserAgent,
		maxDepth:           c.MaxDepth,
		maxRequests:        c.MaxRequests,
		allowedDomains:     normaliseDomains(c.AllowedDomains),
		disallowedDomains:  normaliseDomains(c.DisallowedDomains),
		disallowedURLs:     slices.Clone(c.DisallowedURLFilters),
		urlFilters:         slices.Clone(c.URLFilters),
		allowRevisit:       c.AllowURLRevisit,
		maxBodySize:        c.MaxBodySize,
		cacheDir:           c.CacheDir,
		cacheExpiration:    c.CacheExpiration,
		ignoreRobots:       c.IgnoreRobotsTxt,
		async:              c.Async,
		parseHTTPErrors:    c.ParseHTTPErrorResponse,
		detectCharset:      c.DetectCharset,
		checkHead:          c.CheckHead,
		traceHTTP:          c.TraceHTTP,
		sortQuery:          c.SortQuery,
		workers:            c.workers,
		maxParked:          c.maxParked,
		queueLookahead:     c.queueLookahead,
		maxPending:         pendingBound(c.maxPending),
		retry:              c.retry,
		stopGrace:          c.stopGrace,
		busyRetries:        c.busyRetries,
		stdCtx:             c.Context,
		redirectMaxHops:    10,
		redirectCheckDepth: true,
		otherScheme:        c.shared.backend.supportsScheme,
		sitemapsFromRobots: c.sitemapsFromRobots,
		sitemapSince:       c.sitemapSince,
		progressEvery:      c.progressEvery,
	}
	if cfg.stdCtx == nil {
		cfg.stdCtx = context.Background()
	}
	if cfg.cacheDir != "" {
		cfg.cache = &fileCache{dir: cfg.cacheDir, expiration: cfg.cacheExpiration}
	}
	return cfg
}

// normaliseDomains lowercases entries and drops ports, so that an entry
// written as "127.0.0.1:8080" matches the hostname (Colly never matches it),
// and writes internationalised names in their ASCII (punycode) form, the
// form links are in: "bücher.test" matches xn--bcher-kva.test.
func normaliseDomains(ds []string) []string {
	if len(ds) == 0 {
		return nil
	}
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		d = strings.TrimSpace(d)
		if h, _, err := net.SplitHostPort(d); err == nil {
			d = h
		}
		out = append(out, asciiHost(strings.Trim(d, "[]")))
	}
	return out
}

// asciiHost is a hostname in lower case and, when it is an
// internationalised name, in its IDNA ASCII form (UTS #46 lookup mapping,
// as browsers and the WHATWG URL parser apply). A name IDNA refuses is only
// lowercased: it is compared as written.
func asciiHost(h string) string {
	if isASCII(h) {
		return strings.ToLower(h)
	}
	if a, err := idna.Lookup.ToASCII(h); err == nil {
		return a
	}
	return strings.ToLower(h)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checkURL applies the checks that need only the URL and depth: scheme,
// depth, URL filters and domain filters. Redirect hops run it too.
func (cfg *config) checkURL(u *url.URL, depth int) error {
	web := isWeb(u)
	if !web && (u.Scheme == "" || cfg.otherScheme == nil || !cfg.otherScheme(u.Scheme)) {
		return fmt.Errorf("%w: scheme %q in %q", ErrUnsupportedScheme, u.Scheme, u.Redacted())
	}
	hostname := u.Hostname()
	if hostname == "" && web {
		return fmt.Errorf("%w: no host in %q", ErrMissingURL, u.Redacted())
	}
	if cfg.maxDepth > 0 && depth > cfg.maxDepth {
		return ErrMaxDepth
	}
	if len(cfg.disallowedURLs) > 0 || len(cfg.urlFilters) > 0 {
		s := u.String()
		for _, re := range cfg.disallowedURLs {
			if re.MatchString(s) {
				return ErrForbiddenURL
			}
		}
		if len(cfg.urlFilters) > 0 && !slices.ContainsFunc(cfg.urlFilters, func(re *regexp.Regexp) bool { return re.MatchString(s) }) {
			return ErrNoURLFiltersMatch
		}
	}
	if hostname == "" {
		return nil // a file:// URL: domain filters are about servers
	}
	host := asciiHost(hostname)
	if slices.Contains(cfg.disallowedDomains, host) {
		return ErrForbiddenDomain
	}
	if len(cfg.allowedDomains) > 0 && !slices.Contains(cfg.allowedDomains, host) {
		return ErrForbiddenDomain
	}
	return nil
}

// isWeb reports whether u is an http or https URL, to which robots.txt and
// host limits apply.
func isWeb(u *url.URL) bool { return u.Scheme == "http" || u.Scheme == "https" }

// userAgentOf is the User-Agent a request is sent with.
func (cfg *config) userAgentOf(h map[string][]string) string {
	if v, ok := h["User-Agent"]; ok {
		if len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return cfg.userAgent
}

// checkRobots refuses u when robots.txt forbids it for userAgent, and hands
// the host's Crawl-delay to the limiter.
func (c *Collector) checkRobots(ctx context.Context, cfg *config, u *url.URL, userAgent string) error {
	return c.checkRobotsFresh(ctx, cfg, u, userAgent, false)
}

// checkRobotsFresh is checkRobots; fresh asks a host known to be down again
// (robotsCache.recheck).
func (c *Collector) checkRobotsFresh(ctx context.Context, cfg *config, u *url.URL, userAgent string, fresh bool) error {
	if cfg.ignoreRobots || !isWeb(u) {
		return nil
	}
	check := c.shared.robots.check
	if fresh {
		check = c.shared.robots.recheck
	}
	allowed, delay, err := check(ctx, u, userAgent)
	if err != nil {
		var pending *robotsPendingError
		var down *hostDownError
		if ctx.Err() != nil || errors.As(err, &pending) || errors.As(err, &down) ||
			errors.Is(err, ErrRobotsTxtUnavailable) || errors.Is(err, ErrPrivateNetwork) {
			// Stopping (not the host failing), or the cache's own verdict.
			return err
		}
		return fmt.Errorf("%w: robots.txt of %s: %w", ErrRobotsTxtUnavailable, u.Host, err)
	}
	if delay > 0 {
		c.shared.limiter.SetCrawlDelay(u.Host, delay)
	}
	if !allowed {
		return ErrRobotsTxtBlocked
	}
	return nil
}

// admit runs every check a request must pass before it may wait in the
// frontier. When it returns nil the request holds a MaxRequests slot and,
// unless it bypasses the visited check, is marked visited.
//
// A request with deferMark set (a link found during a queue run) takes
// neither: it is only checked against the visited set, and gets its slot and
// its mark when its queue entry is leased. Marking at discovery would open a
// window — mark written, entry not yet pushed — in which a crash loses the
// page; marking at lease time leaves only duplicates in the queue, which the
// lease refuses.
func (c *Collector) admit(ctx context.Context, cfg *config, req *Request) error {
	if err := cfg.checkURL(req.URL, req.Depth); err != nil {
		return err
	}
	c.shared.creds.noteStart(req)
	if req.Method != "HEAD" && isWeb(req.URL) {
		req.robotsUA = cfg.userAgentOf(*req.Headers)
		if err := c.checkRobots(ctx, cfg, req.URL, req.robotsUA); err != nil {
			var pending *robotsPendingError
			var down *hostDownError
			switch {
			case errors.As(err, &pending):
				// robots.txt is unreachable for now: the request waits in
				// the frontier (holding no worker) and is checked again
				// when it is due (see fetch).
				req.robotsWait = pending.Until
			case errors.As(err, &down):
				// The host cannot be reached: not a refusal. The request
				// goes on, is checked again before it is sent, and fails
				// to OnError if the host is still down (see fetch).
				req.robotsWait = time.Now()
			default:
				return err
			}
		}
	}
	req.visitKey = requestKey(req.Method, canonicalURL(req.URL, cfg.sortQuery), req.bodyBytes)
	if req.deferMark {
		if req.checkRevisit && !cfg.allowRevisit && !req.batchingLinks() {
			// This check only saves queue space; the lease checks for good.
			// A link batched with its page's other links is checked when
			// the batch is stored, in the same round trip as the push.
			// A failing visited set must not refuse the link (its parent's
			// entry is acknowledged, so nothing would find it again): it is
			// queued, at worst as a duplicate the lease refuses.
			seen, err := c.storage().IsVisited(req.visitKey)
			if err == nil && seen {
				return &AlreadyVisitedError{Destination: req.URL}
			}
			if err != nil && c.debugEnabled() {
				c.logger.Debug("visited check failed; queueing the link anyway", "url", req.URL.Redacted(), "err", err)
			}
		}
		return nil
	}
	// A redelivered queue entry took its slot on its first delivery.
	slot := !req.redelivered
	if slot && !c.reserveSlot(cfg) {
		return ErrMaxRequests
	}
	if req.checkRevisit && !cfg.allowRevisit {
		var added bool
		var err error
		if req.premark == premarkAdded || req.premark == premarkSeen {
			// Marked with the rest of its queue Lease batch.
			added = req.premark == premarkAdded
		} else {
			added, err = c.markVisited(ctx, req.visitKey)
		}
		req.premark = 0
		if err == nil && !added && !req.ownsMark {
			err = &AlreadyVisitedError{Destination: req.URL}
		} else if err != nil {
			err = &StorageError{Op: "visited", Err: err}
		}
		if err != nil {
			if slot {
				c.releaseSlot()
			}
			return err
		}
		req.marked = true
	}
	return nil
}

// unadmit undoes admit for a request that could not be queued after all.
func (c *Collector) unadmit(req *Request) {
	if req.deferMark {
		return // it took no slot and no mark
	}
	c.releaseSlot()
	c.forgetVisited(req)
}

// forgetVisited removes a failed request's visited mark so that it may be
// tried again later.
func (c *Collector) forgetVisited(req *Request) {
	if !req.marked {
		return
	}
	req.marked = false
	keys := append([]uint64{req.visitKey}, req.redirectKeys...)
	req.redirectKeys = nil
	if vs, ok := c.storage().(storage.VisitedSet); ok {
		if err := vs.RemoveVisited(context.Background(), keys...); err != nil {
			c.logger.Warn("forgetting a failed request", "url", req.URL.Redacted(), "err", err)
		}
	}
}

// reserveSlot takes one of MaxRequests slots with a CAS loop, so that the
// limit holds exactly however many goroutines admit at once.
func (c *Collector) reserveSlot(cfg *config) bool {
	for {
		n := c.requestCount.Load()
		if cfg.maxRequests > 0 && n >= cfg.maxRequests {
			return false
		}
		if c.requestCount.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *Collector) releaseSlot() { c.requestCount.Add(^uint32(0)) }

// markVisited adds key to the visited set in one atomic step and reports
// whether this call added it.
func (c *Collector) markVisited(ctx context.Context, key uint64) (bool, error) {
	st := c.storage()
	if vs, ok := st.(storage.VisitedSet); ok {
		added, err := vs.AddVisited(ctx, key)
		if err != nil {
			return false, err
		}
		return len(added) == 1 && added[0], nil
	}
	// A Colly-style store has only IsVisited and Visited: serialise the pair
	// in-process, which is exact for one process.
	c.visitMu.Lock()
	defer c.visitMu.Unlock()
	seen, err := st.IsVisited(key)
	if err != nil || seen {
		return false, err
	}
	return true, st.Visited(key)
}

// parked is the politeness gate's bound for a run with workers download workers.
// lookahead is the queue look-ahead cap (QueueLookahead).
func (cfg *config) lookahead() int {
	if cfg.queueLookahead > 0 {
		return cfg.queueLookahead
	}
	return DefaultQueueLookahead
}

func (cfg *config) parked(workers int) int {
	if cfg.maxParked > 0 {
		return cfg.maxParked
	}
	return max(256, 4*workers)
}
