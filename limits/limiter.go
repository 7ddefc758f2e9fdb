package limits

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the Limiter options.
const (
	DefaultIdleTimeout = 10 * time.Minute
	DefaultMaxBackoff  = time.Minute
	DefaultMaxHold     = 10 * time.Minute
)

// Option configures a Limiter in New.
type Option func(*Limiter)

// IgnoreCrawlDelay makes the Limiter disregard robots.txt Crawl-delay for
// every host; SetCrawlDelay becomes a no-op.
func IgnoreCrawlDelay() Option { return func(l *Limiter) { l.ignoreCrawl = true } }

// IdleTimeout sets how long a Gate keeps the state of a host that has nothing
// parked, nothing in flight and no pending hold (default DefaultIdleTimeout).
// Dropping it forgets the host's adapted delay and back-off. d <= 0 keeps
// the default.
func IdleTimeout(d time.Duration) Option {
	return func(l *Limiter) {
		if d > 0 {
			l.idleTimeout = d
		}
	}
}

// MaxBackoff caps the exponential back-off after repeated 429/503 responses
// and is the default AutoThrottle.MaxDelay (default DefaultMaxBackoff).
// d <= 0 keeps the default.
func MaxBackoff(d time.Duration) Option {
	return func(l *Limiter) {
		if d > 0 {
			l.maxBackoff = d
		}
	}
}

// MaxHold caps waits a server imposes on itself, Retry-After and robots.txt
// Crawl-delay, so a hostile or mistaken value cannot park a host's requests
// for days (default DefaultMaxHold). d <= 0 keeps the default.
func MaxHold(d time.Duration) Option {
	return func(l *Limiter) {
		if d > 0 {
			l.maxHold = d
		}
	}
}

// Limiter holds the rules and the robots.txt Crawl-delays; a Gate holds the
// per-host scheduling state and consults its Limiter. The zero value is a
// Limiter with no rules and default options, like New(). Safe for
// concurrent use; several Gates may share one Limiter. Each Gate keeps its
// own per-host state while it is open; when it closes, what must outlive it
// (a host's next start under Delay or Crawl-delay, a Retry-After or back-off
// hold, back-off strikes, an AutoThrottle delay) stays with the Limiter, and
// a Gate opened later (the next crawl) starts each host from there. So
// politeness belongs to the Limiter's owner, not to one Gate. Remembered
// hosts are forgotten once their hold has passed and IdleTimeout elapsed.
type Limiter struct {
	ignoreCrawl bool
	idleTimeout time.Duration
	maxBackoff  time.Duration
	maxHold     time.Duration

	// version changes whenever rules change, so Gates re-resolve hosts.
	version atomic.Uint64
	// nCrawl is len(crawl), read without the lock to skip the map when
	// no host has a Crawl-delay.
	nCrawl atomic.Int64
	// nBudget counts the rules with a MaxRequestsPerHost, so that
	// HostBudget skips the rules when none has one.
	nBudget atomic.Int64
	// shared is the external per-host state, nil for none.
	shared atomic.Pointer[sharedCfg]
	// by is the default Politeness; ruleKeys is set once a rule keys its
	// hosts by domain or address (see keying).
	by       atomic.Uint32
	ruleKeys atomic.Bool
	// dns resolves names for PolitenessIP; nil until first needed.
	dns atomic.Pointer[dnsCache]
	// crawlVer changes whenever a Crawl-delay does, so that a slot shared
	// by several hosts knows when to look at theirs again.
	crawlVer atomic.Uint64

	// mu guards rules, entries and crawl.
	mu      sync.RWMutex
	rules   []*Rule
	entries []*entry
	crawl   map[string]time.Duration

	// memMu guards mem and memSweep.
	memMu sync.Mutex
	// mem holds what closed Gates left of their hosts, by host key.
	mem map[string]memo
	// memSweep is the size of mem at which remember next drops expired
	// entries, so that the sweep costs O(1) per entry amortised.
	memSweep int

	// gatesMu guards gates; it is never taken under a Gate's lock.
	gatesMu sync.Mutex
	// gates are the open Gates made by NewGate over the Limiter, oldest
	// first, for Acquire.
	gates []acquirer
}

// memo is the part of a host's state that outlives a Gate.
type memo struct {
	nextStart, hold time.Time
	strikes         int
	adapt           time.Duration
	learned         bool
	// expires is when the memo is no longer worth keeping.
	expires time.Time
}

// entry is the snapshot of a Rule taken by Add; the Gate reads only this.
type entry struct {
	m           *matcher
	delay       time.Duration
	random      time.Duration
	par         int
	total       int
	ignoreCrawl bool
	perSlot     bool
	auto        bool
	target      float64
	maxDelay    time.Duration
	budget      int
	by          Politeness
	// pos is the rule's position among the Limiter's rules, from 1.
	pos int
}

// New returns a Limiter with no rules: every host is unlimited except for
// robots.txt Crawl-delay and server back-off.
func New(opts ...Option) *Limiter {
	l := &Limiter{
		idleTimeout: DefaultIdleTimeout,
		maxBackoff:  DefaultMaxBackoff,
		maxHold:     DefaultMaxHold,
		crawl:       make(map[string]time.Duration),
	}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	return l
}

// Add appends rules; the first matching rule applies to a host. It checks
// every rule first (ErrNoPattern, ErrBadPattern, ErrNegativeBudget,
// ErrBadPoliteness) and adds none if one fails. Rules added while a crawl
// runs apply to each host from its next request.
func (l *Limiter) Add(rules ...*Rule) error {
	es := make([]*entry, 0, len(rules))
	for _, r := range rules {
		if r == nil {
			return ErrNoPattern
		}
		m, err := r.compiled()
		if err != nil {
			return err
		}
		if r.MaxRequestsPerHost < 0 {
			return fmt.Errorf("%w: %d in the rule for %q", ErrNegativeBudget, r.MaxRequestsPerHost, cmp.Or(r.DomainGlob, r.DomainRegexp))
		}
		if err := r.PolitenessBy.valid(); err != nil {
			return err
		}
		e := &entry{
			m:           m,
			delay:       max(r.Delay, 0),
			random:      max(r.RandomDelay, 0),
			par:         max(r.Parallelism, 0),
			total:       max(r.TotalParallelism, 0),
			ignoreCrawl: r.IgnoreCrawlDelay,
			perSlot:     r.DelayPerSlot,
			budget:      r.MaxRequestsPerHost,
			by:          r.PolitenessBy,
		}
		if a := r.AutoThrottle; a != nil && !r.DelayPerSlot {
			e.auto = true
			e.target = a.TargetConcurrency
			if e.target <= 0 {
				e.target = 1
			}
			e.maxDelay = a.MaxDelay
			if e.maxDelay <= 0 {
				e.maxDelay = l.backoffCap()
			}
			e.maxDelay = max(e.maxDelay, e.delay)
		}
		es = append(es, e)
	}
	l.mu.Lock()
	for i, e := range es {
		e.pos = len(l.entries) + i + 1
		if e.by == PolitenessDomain || e.by == PolitenessIP {
			l.ruleKeys.Store(true)
		}
	}
	l.rules = append(l.rules, rules...)
	l.entries = append(l.entries, es...)
	for _, e := range es {
		if e.budget > 0 {
			l.nBudget.Add(1)
		}
	}
	l.version.Add(1)
	l.mu.Unlock()
	return nil
}

// HasBudgets reports whether a rule sets MaxRequestsPerHost.
func (l *Limiter) HasBudgets() bool { return l.nBudget.Load() > 0 }

// HostBudget returns the MaxRequestsPerHost of the first rule that matches
// host (host:port, as url.URL.Host), or 0 when that rule sets none or no
// rule matches: the host then has the collector's budget. Without rules
// that set one it costs an atomic load.
func (l *Limiter) HostBudget(host string) int {
	if l.nBudget.Load() == 0 {
		return 0
	}
	e, _ := l.lookup(host)
	if e == nil {
		return 0
	}
	return e.budget
}

// MostParallel returns the most requests in flight any host may have
// under the rules: the largest Parallelism of a rule, 1 for a rule with a
// delay and no Parallelism, and unmatched (what the caller allows a host
// no rule matches; 0 for no limit) when probe, a host name no rule should
// single out, matches no rule. 0 means some host has no limit. A queue
// run leases at most twice this many entries of one host.
func (l *Limiter) MostParallel(probe string, unmatched int) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	most, covered := 0, false
	for _, e := range l.entries {
		p := e.par
		if p <= 0 && (e.delay > 0 || e.random > 0 || e.auto) {
			p = 1
		}
		if p <= 0 && !e.auto {
			return 0
		}
		most = max(most, p)
		if e.m.match(probe) {
			covered = true
			break // later rules never apply to a host this one matches
		}
	}
	if !covered {
		if unmatched <= 0 {
			return 0
		}
		most = max(most, unmatched)
	}
	return most
}

// Rules returns the rules in order, as added.
func (l *Limiter) Rules() []*Rule {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]*Rule(nil), l.rules...)
}

// SetCrawlDelay records robots.txt's Crawl-delay for host (host:port): a
// floor for the delay of a matching rule unless it sets IgnoreCrawlDelay,
// and the delay of a host without a rule. d <= 0 forgets the host; whoever
// caches robots.txt should do so when it drops the host, since the Limiter
// keeps one entry per host with a Crawl-delay. d is capped by MaxHold. It
// takes effect from the host's next request start.
func (l *Limiter) SetCrawlDelay(host string, d time.Duration) {
	if l.ignoreCrawl {
		return
	}
	d = min(d, l.holdCap())
	l.mu.Lock()
	if d <= 0 {
		delete(l.crawl, host)
	} else {
		if l.crawl == nil {
			l.crawl = make(map[string]time.Duration)
		}
		l.crawl[host] = d
	}
	l.nCrawl.Store(int64(len(l.crawl)))
	l.crawlVer.Add(1)
	l.mu.Unlock()
}

// crawlDelay returns host's Crawl-delay, 0 if none.
func (l *Limiter) crawlDelay(host string) time.Duration {
	if l.nCrawl.Load() == 0 {
		return 0
	}
	l.mu.RLock()
	d := l.crawl[host]
	l.mu.RUnlock()
	return d
}

// longestCrawlDelay returns the longest Crawl-delay of hosts, 0 if none.
func (l *Limiter) longestCrawlDelay(hosts map[string]struct{}) time.Duration {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var d time.Duration
	for h := range hosts {
		d = max(d, l.crawl[h])
	}
	return d
}

// lookup returns the first entry matching host (nil if none) and the rules
// version it was resolved at.
func (l *Limiter) lookup(host string) (*entry, uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	v := l.version.Load()
	for _, e := range l.entries {
		if e.m.match(host) {
			return e, v
		}
	}
	return nil, v
}

// MaxHold returns the cap on waits a server imposes on itself (see the
// MaxHold option), for callers that schedule such waits themselves, like
// a retry after Retry-After.
func (l *Limiter) MaxHold() time.Duration { return l.holdCap() }

// remember keeps what must outlive h's Gate, if anything: a start still
// to wait for, strikes or an adapted delay.
func remember[T any](l *Limiter, h *host[T], now time.Time) {
	startAt := h.nextStart
	if h.hold.After(startAt) {
		startAt = h.hold
	}
	if !startAt.After(now) && h.strikes == 0 && !h.learned {
		return
	}
	m := memo{nextStart: h.nextStart, hold: h.hold, strikes: h.strikes, adapt: h.adapt, learned: h.learned,
		expires: now.Add(l.idle())}
	if startAt.After(now) {
		m.expires = startAt.Add(l.idle())
	}
	l.memMu.Lock()
	defer l.memMu.Unlock()
	if l.mem == nil {
		l.mem = make(map[string]memo)
	}
	if old, ok := l.mem[h.key]; ok {
		// Two Gates (a collector and its clone) crawled the host at
		// once: keep the later of each wait.
		m.nextStart = later(m.nextStart, old.nextStart)
		m.hold = later(m.hold, old.hold)
		m.expires = later(m.expires, old.expires)
	}
	l.mem[h.key] = m
	if len(l.mem) >= l.memSweep {
		for k, v := range l.mem {
			if !v.expires.After(now) {
				delete(l.mem, k)
			}
		}
		l.memSweep = max(64, 2*len(l.mem))
	}
}

// recall gives a new host of a Gate what an earlier Gate left of it.
func recall[T any](l *Limiter, h *host[T]) {
	l.memMu.Lock()
	m, ok := l.mem[h.key]
	l.memMu.Unlock()
	if !ok {
		return
	}
	h.nextStart, h.hold, h.strikes, h.adapt, h.learned = m.nextStart, m.hold, m.strikes, m.adapt, m.learned
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (l *Limiter) idle() time.Duration       { return orDefault(l.idleTimeout, DefaultIdleTimeout) }
func (l *Limiter) backoffCap() time.Duration { return orDefault(l.maxBackoff, DefaultMaxBackoff) }
func (l *Limiter) holdCap() time.Duration    { return orDefault(l.maxHold, DefaultMaxHold) }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
