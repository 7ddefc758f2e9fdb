package magpie

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/idna"
)

// settings are the Collector's unexported knobs, each set by its option. A
// new option adds a field here and writes it in its setter: Clone, Init and
// the crawl's snapshot (config) copy the whole value. Colly's exported
// Collector fields stay fields of Collector, copied one by one.
type settings struct {
	logger *slog.Logger
	// workers is Workers' n (0: the pool follows the limits).
	workers int
	// maxPerHost is MaxRequestsPerHost's n (0: no budget; < 0 refused
	// when a crawl starts, see validate).
	maxPerHost int
	// politenessErr is PolitenessBy's error for a value that is not a
	// limits constant (refused when a crawl starts, see validate).
	politenessErr error
	// maxParked is MaxParked's n (0: the default).
	maxParked int
	// queueLookahead is QueueLookahead's cap (0: the default).
	queueLookahead int
	// retry is RetryPolicy's policy (nil: none).
	retry *RetryOptions
	// maxPending is MaxPending's n (0: DefaultMaxPending, < 0: no bound).
	maxPending int
	// stopGrace is StopGrace's period (0: DefaultStopGrace).
	stopGrace time.Duration
	// busyRetries is BusyRetries' bound (0: DefaultBusyRetries, < 0: none).
	busyRetries int
	// maxRetryAfter is MaxRetryAfter's bound (0: none but MaxHold).
	maxRetryAfter time.Duration
	// sitemapSince and sitemapsFromRobots are set by SitemapModifiedSince
	// and SitemapsFromRobots.
	sitemapSince time.Time
	// progressEvery is ProgressInterval's period (0: no progress line).
	progressEvery      time.Duration
	sitemapsFromRobots bool
	// streamHTML is set by StreamHTML.
	streamHTML bool
	// reuseBody is set by ReuseBody.
	reuseBody bool
	// order is BreadthFirst's or DepthFirst's depth term (orderNone:
	// none); it sits with the bools, where it costs no space.
	order crawlOrder
	// recrawl is Recrawl's session (nil: recrawling is off); see recrawl.go.
	recrawl *recrawler
	// prioritize points to Prioritize's hook (nil: none); a pointer, so
	// that settings stay comparable.
	prioritize *func(*Request) int
}

// defaultSettings are NewCollector's (and Init's): a silent logger, every
// other knob at its zero value, which means its default.
func defaultSettings() settings {
	return settings{logger: slog.New(slog.DiscardHandler)}
}

// config is the snapshot of a Collector's exported fields that one crawl runs
// with, so that a crawl never races with a caller changing fields.
type config struct {
	userAgent         string
	maxDepth          int
	allowedDomains    domainSet
	disallowedDomains domainSet
	disallowedURLs    []*regexp.Regexp
	urlFilters        []*regexp.Regexp
	maxBodySize       int
	cacheDir          string
	cacheExpiration   time.Duration
	// settings are the collector's knobs as the crawl started (the
	// in-memory frontier's bound is pendingBound(maxPending)).
	settings
	stdCtx          context.Context
	cache           *fileCache
	redirectMaxHops int
	// otherScheme reports whether the transport serves a scheme other than
	// http and https (a protocol registered on it, such as "file").
	otherScheme func(scheme string) bool
	// The small fields last, together, so that a snapshot stays in the
	// allocation size class it had before settings were one value.
	maxRequests        uint32
	allowRevisit       bool
	ignoreRobots       bool
	async              bool
	parseHTTPErrors    bool
	detectCharset      bool
	checkHead          bool
	traceHTTP          bool
	sortQuery          bool
	redirectCheckDepth bool
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
		allowedDomains:     newDomainSet(c.AllowedDomains),
		disallowedDomains:  newDomainSet(c.DisallowedDomains),
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
		settings:           c.settings,
		stdCtx:             c.Context,
		redirectMaxHops:    10,
		redirectCheckDepth: true,
		otherScheme:        c.shared.backend.supportsScheme,
	}
	if cfg.stdCtx == nil {
		cfg.stdCtx = context.Background()
	}
	if cfg.cacheDir != "" {
		cfg.cache = &fileCache{dir: cfg.cacheDir, expiration: cfg.cacheExpiration}
	}
	return cfg
}

// validate returns the error of a setting an option took but a crawl
// cannot run with; startRun calls it.
func (cfg *config) validate() error {
	if cfg.maxPerHost < 0 {
		return fmt.Errorf("%w: MaxRequestsPerHost(%d)", ErrNegativeBudget, cfg.maxPerHost)
	}
	if cfg.politenessErr != nil {
		return fmt.Errorf("PolitenessBy: %w", cfg.politenessErr)
	}
	return nil
}

// domainSet is AllowedDomains or DisallowedDomains, normalised. A long
// list is kept as a set too: a broad crawl told its thousands of hosts
// checks every link it finds against them, and a scan of the list made
// that check cost a quarter of the crawl's CPU at 20,000 hosts.
type domainSet struct {
	list []string
	set  map[string]struct{} // nil for a short list
}

// domainSetScan is the longest list that is scanned rather than hashed.
const domainSetScan = 8

// newDomainSet normalises ds (see normaliseDomains) into a domainSet.
func newDomainSet(ds []string) domainSet {
	s := domainSet{list: normaliseDomains(ds)}
	if len(s.list) > domainSetScan {
		s.set = make(map[string]struct{}, len(s.list))
		for _, d := range s.list {
			s.set[d] = struct{}{}
		}
	}
	return s
}

// empty reports whether the list names no domain.
func (s domainSet) empty() bool { return len(s.list) == 0 }

// has reports whether host, normalised as the list is, is in it.
func (s domainSet) has(host string) bool {
	if s.set != nil {
		_, ok := s.set[host]
		return ok
	}
	return slices.Contains(s.list, host)
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
