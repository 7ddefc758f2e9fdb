// Package limits holds per-host politeness rules and the Gate that applies
// them without holding a download worker. SKELETON: the API is fixed; the
// implementation below admits everything at once and is being replaced.
package limits

import (
	"context"
	"errors"
	"sync"
	"time"
)

var (
	// ErrNoPattern is returned when a Rule has neither DomainGlob nor DomainRegexp.
	ErrNoPattern = errors.New("No pattern defined in LimitRule")
	// ErrClosed is returned by Gate methods after Close.
	ErrClosed = errors.New("limits: gate closed")
)

// AutoThrottle adapts a host's delay to its observed latency.
type AutoThrottle struct {
	// TargetConcurrency is the average number of requests to keep in flight
	// to each host; the target delay is latency / TargetConcurrency.
	TargetConcurrency float64
	// MaxDelay caps the adapted delay.
	MaxDelay time.Duration
}

// Rule is Colly's LimitRule: which hosts it matches and how politely they are
// crawled. A Rule is matched on the hostname; a pattern that contains a port
// is matched against host:port.
type Rule struct {
	// DomainRegexp matches hosts by regular expression.
	DomainRegexp string
	// DomainGlob matches hosts by glob (gobwas/glob, '.' as separator).
	DomainGlob string
	// Delay is the least time between two request starts to one host.
	Delay time.Duration
	// RandomDelay adds a uniform random extra delay in [0, RandomDelay).
	RandomDelay time.Duration
	// Parallelism is the most requests in flight to one host (0: no limit).
	Parallelism int
	// TotalParallelism, when positive, also caps requests in flight across
	// all hosts the rule matches together.
	TotalParallelism int
	// IgnoreCrawlDelay stops robots.txt Crawl-delay from raising Delay.
	IgnoreCrawlDelay bool
	// AutoThrottle, when set, adapts each host's delay to its latency.
	AutoThrottle *AutoThrottle
}

// Init checks and compiles the rule's pattern.
func (r *Rule) Init() error {
	if r.DomainGlob == "" && r.DomainRegexp == "" {
		return ErrNoPattern
	}
	return nil
}

// Match reports whether the rule applies to host (a hostname or host:port).
func (r *Rule) Match(host string) bool { return false }

// Result is what a finished request tells the limiter.
type Result struct {
	// StatusCode is the response status, 0 for a transport error.
	StatusCode int
	// Err is the transport error, if any.
	Err error
	// Latency is the time from start to response headers.
	Latency time.Duration
	// RetryAfter is the server's Retry-After, 0 if absent.
	RetryAfter time.Duration
}

// Limiter holds the rules and the per-host state. Safe for concurrent use.
type Limiter struct {
	// mu guards rules.
	mu    sync.Mutex
	rules []*Rule
}

// New returns a Limiter with no rules: every host is unlimited.
func New() *Limiter { return &Limiter{} }

// Add appends rules; the first matching rule applies to a host.
func (l *Limiter) Add(rules ...*Rule) error {
	for _, r := range rules {
		if err := r.Init(); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.rules = append(l.rules, rules...)
	l.mu.Unlock()
	return nil
}

// Rules returns the rules in order.
func (l *Limiter) Rules() []*Rule {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Rule(nil), l.rules...)
}

// SetCrawlDelay records robots.txt's Crawl-delay for host (host:port), a
// floor for the delay of a matching rule unless it sets IgnoreCrawlDelay.
func (l *Limiter) SetCrawlDelay(host string, d time.Duration) {}

// Ticket is a started request's claim on its host; call Done exactly once.
type Ticket struct{ done func(Result) }

// Done reports the request finished and frees its host slot.
func (t *Ticket) Done(res Result) {
	if t != nil && t.done != nil {
		t.done(res)
	}
}

// Gate parks items until their host may start another request, so that a
// waiting request holds no worker. It holds at most maxParked items. Safe for
// concurrent use.
type Gate[T any] struct {
	lim *Limiter
	ch  chan item[T]
	// mu guards closed.
	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

type item[T any] struct {
	host string
	v    T
}

// NewGate returns a Gate over lim that parks at most maxParked items (<= 0: 1024).
func NewGate[T any](lim *Limiter, maxParked int) *Gate[T] {
	if maxParked <= 0 {
		maxParked = 1024
	}
	return &Gate[T]{lim: lim, ch: make(chan item[T], maxParked), done: make(chan struct{})}
}

// Put parks v for host (host:port). It blocks while the gate is full, and
// returns ctx.Err() or ErrClosed when it gives up.
func (g *Gate[T]) Put(ctx context.Context, host string, v T) error {
	select {
	case g.ch <- item[T]{host, v}:
		return nil
	case <-g.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get blocks until a parked item's host may start a request, takes that
// host's slot and returns the item with its Ticket. Items of one host come
// out in Put order; hosts do not wait for each other.
func (g *Gate[T]) Get(ctx context.Context) (T, *Ticket, error) {
	var zero T
	select {
	case it := <-g.ch:
		return it.v, &Ticket{}, nil
	case <-g.done:
		return zero, nil, ErrClosed
	case <-ctx.Done():
		return zero, nil, ctx.Err()
	}
}

// Len returns the number of parked items.
func (g *Gate[T]) Len() int { return len(g.ch) }

// Close wakes every blocked Put and Get with ErrClosed and returns the items
// still parked, so the caller can put them back. Idempotent.
func (g *Gate[T]) Close() []T {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	close(g.done)
	var out []T
	for {
		select {
		case it := <-g.ch:
			out = append(out, it.v)
		default:
			return out
		}
	}
}
