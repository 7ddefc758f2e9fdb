package limits

import (
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
// Limiter with no rules and default options, like New(). Safe for concurrent use; several Gates may share one
// Limiter (each then keeps its own per-host state).
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
	// shared is the external per-host state, nil for none.
	shared atomic.Pointer[sharedCfg]

	// mu guards rules, entries and crawl.
	mu      sync.RWMutex
	rules   []*Rule
	entries []*entry
	crawl   map[string]time.Duration
}

// entry is the snapshot of a Rule taken by Add; the Gate reads only this.
type entry struct {
	m           *matcher
	delay       time.Duration
	random      time.Duration
	par         int
	total       int
	ignoreCrawl bool
	auto        bool
	target      float64
	maxDelay    time.Duration
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
// every rule first (ErrNoPattern, ErrBadPattern) and adds none if one fails.
// Rules added while a crawl runs apply to each host from its next request.
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
		e := &entry{
			m:           m,
			delay:       max(r.Delay, 0),
			random:      max(r.RandomDelay, 0),
			par:         max(r.Parallelism, 0),
			total:       max(r.TotalParallelism, 0),
			ignoreCrawl: r.IgnoreCrawlDelay,
		}
		if a := r.AutoThrottle; a != nil {
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
	l.rules = append(l.rules, rules...)
	l.entries = append(l.entries, es...)
	l.version.Add(1)
	l.mu.Unlock()
	return nil
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

func (l *Limiter) idle() time.Duration       { return orDefault(l.idleTimeout, DefaultIdleTimeout) }
func (l *Limiter) backoffCap() time.Duration { return orDefault(l.maxBackoff, DefaultMaxBackoff) }
func (l *Limiter) holdCap() time.Duration    { return orDefault(l.maxHold, DefaultMaxHold) }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
