package limits

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/glob"
)

// AutoThrottle adapts a host's delay to its observed latency. The zero value
// targets one request in flight with no MaxDelay beyond the Limiter's
// back-off cap.
type AutoThrottle struct {
	// TargetConcurrency is the average number of requests to keep in flight
	// to each host; the target delay is latency / TargetConcurrency. Values
	// <= 0 mean 1.
	TargetConcurrency float64
	// MaxDelay caps the adapted delay; 0 means the Limiter's MaxBackoff
	// (one minute by default).
	MaxDelay time.Duration
}

// Rule is Colly's LimitRule: which hosts it matches and how politely they are
// crawled. A Rule is matched on the hostname; a pattern that contains a port
// is matched against host:port. The zero value has no pattern and fails Init
// with ErrNoPattern. Set the fields before adding the Rule to a Limiter and
// do not change them afterwards; Init and Match are safe for concurrent use.
type Rule struct {
	// DomainRegexp matches hosts by regular expression (unanchored, like
	// Colly's).
	DomainRegexp string
	// DomainGlob matches hosts by glob (gobwas/glob compiled without
	// separators, like Colly's: '*' crosses dots).
	DomainGlob string
	// Delay is the least time between two request starts to one host.
	Delay time.Duration
	// RandomDelay adds a uniform random extra delay in [0, RandomDelay).
	RandomDelay time.Duration
	// Parallelism is the most requests in flight to each matching host
	// (Colly: to all of them together). Values <= 0 mean 1 when the host has
	// a fixed delay (Delay, RandomDelay or Crawl-delay) and no AutoThrottle,
	// as in Colly, and no limit otherwise.
	Parallelism int
	// TotalParallelism, when positive, also caps requests in flight across
	// all hosts the rule matches together.
	TotalParallelism int
	// IgnoreCrawlDelay stops robots.txt Crawl-delay from raising Delay.
	IgnoreCrawlDelay bool
	// DelayPerSlot spaces requests as Colly does: each of a host's
	// Parallelism slots, after its request ends, waits Delay plus a new
	// random part of RandomDelay before it starts another, so up to
	// Parallelism requests overlap. The default (false) spaces request
	// starts to the host by Delay, whatever the parallelism. A robots.txt
	// Crawl-delay still spaces the host's starts unless IgnoreCrawlDelay;
	// AutoThrottle is not combined with it.
	DelayPerSlot bool
	// AutoThrottle, when set, adapts each host's delay to its latency.
	AutoThrottle *AutoThrottle
	// MaxRequestsPerHost, when positive, is the budget of each matching
	// host: the most requests a collector admits to it (magpie's
	// MaxRequestsPerHost option, which this overrides for the hosts the
	// rule matches, above or below it). 0 leaves the collector's budget;
	// below 0, Add fails with ErrNegativeBudget. The Limiter only keeps
	// the value (HostBudget): the collector counts and refuses.
	MaxRequestsPerHost int
	// PolitenessBy says which matching hosts share one slot, whose
	// Parallelism, Delay, Crawl-delay, AutoThrottle and Retry-After or
	// back-off they then share: each host:port (PolitenessHost), each
	// registrable domain (PolitenessDomain) or each address the names
	// resolve to (PolitenessIP). The zero value takes the Limiter's
	// default, per host unless set. robots.txt stays per host.
	PolitenessBy Politeness

	// mu guards m.
	mu sync.Mutex
	m  *matcher
}

// matcher is a compiled pattern pair; immutable once built, so the Limiter
// can use it without the Rule's lock.
type matcher struct {
	globSrc, reSrc string
	glob           *glob.Pattern
	re             *regexp.Regexp
}

// Init checks and compiles the rule's patterns. It returns ErrNoPattern when
// neither is set, an error wrapping ErrBadPattern when one does not
// compile, and one wrapping ErrBadPoliteness when PolitenessBy is not one
// of the constants. It is idempotent and recompiles only when a pattern
// changed.
func (r *Rule) Init() error {
	if _, err := r.compiled(); err != nil {
		return err
	}
	return r.PolitenessBy.valid()
}

func (r *Rule) compiled() (*matcher, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m != nil && r.m.globSrc == r.DomainGlob && r.m.reSrc == r.DomainRegexp {
		return r.m, nil
	}
	if r.DomainGlob == "" && r.DomainRegexp == "" {
		return nil, ErrNoPattern
	}
	m := &matcher{globSrc: r.DomainGlob, reSrc: r.DomainRegexp}
	if r.DomainGlob != "" {
		g, err := glob.Compile(r.DomainGlob)
		if err != nil {
			return nil, fmt.Errorf("%w: DomainGlob %q: %v", ErrBadPattern, r.DomainGlob, err)
		}
		m.glob = g
	}
	if r.DomainRegexp != "" {
		re, err := regexp.Compile(r.DomainRegexp)
		if err != nil {
			return nil, fmt.Errorf("%w: DomainRegexp %q: %v", ErrBadPattern, r.DomainRegexp, err)
		}
		m.re = re
	}
	r.m = m
	return m, nil
}

// Match reports whether the rule applies to host (a hostname or host:port,
// as in url.URL.Host). Either pattern may match, against the lower-cased
// hostname or the whole host:port. A rule that fails Init matches nothing,
// and no rule matches an empty host (a file:// URL has none): limits are for
// servers.
func (r *Rule) Match(host string) bool {
	m, err := r.compiled()
	if err != nil {
		return false
	}
	return m.match(host)
}

func (m *matcher) match(host string) bool {
	if host == "" {
		return false
	}
	host = lower(host)
	name := hostname(host)
	return m.one(name) || (name != host && m.one(host))
}

func (m *matcher) one(s string) bool {
	return (m.glob != nil && m.glob.Match(s)) || (m.re != nil && m.re.MatchString(s))
}

// hostname strips the port from host:port, and the brackets from an IPv6
// literal, leaving host unchanged when it has no port.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// lower avoids an allocation for the usual, already lower-case host.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// Clone returns a copy of r's settings (and of its AutoThrottle) that can be
// changed and added on its own: its patterns are compiled anew by Init, as
// for a Rule built by hand. Safe to call while r is in use.
func (r *Rule) Clone() *Rule {
	n := &Rule{
		DomainRegexp:       r.DomainRegexp,
		DomainGlob:         r.DomainGlob,
		Delay:              r.Delay,
		RandomDelay:        r.RandomDelay,
		Parallelism:        r.Parallelism,
		TotalParallelism:   r.TotalParallelism,
		IgnoreCrawlDelay:   r.IgnoreCrawlDelay,
		DelayPerSlot:       r.DelayPerSlot,
		PolitenessBy:       r.PolitenessBy,
		MaxRequestsPerHost: r.MaxRequestsPerHost,
	}
	if r.AutoThrottle != nil {
		at := *r.AutoThrottle
		n.AutoThrottle = &at
	}
	return n
}
