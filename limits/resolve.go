package limits

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Resolver looks up the addresses of a host name, for PolitenessIP.
// *net.Resolver implements it (net.DefaultResolver is the default). It must
// be safe for concurrent use.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Bounds of the Limiter's DNS cache.
const (
	// DNSCacheSize is the most names the cache keeps; past it, expired
	// answers go first, then any.
	DNSCacheSize = 4096
	// DNSTTL is how long an answer is kept: a name is resolved again after
	// it, so a host that moved is followed within a minute or so.
	DNSTTL = time.Minute
	// DNSFailTTL is how long a failed lookup is kept, so that a burst of
	// requests to a name that does not resolve costs one lookup.
	DNSFailTTL = 5 * time.Second
)

// WithResolver makes the Limiter resolve names with r for PolitenessIP; see
// SetResolver.
func WithResolver(r Resolver) Option { return func(l *Limiter) { l.SetResolver(r) } }

// SetResolver makes the Limiter resolve the names of hosts keyed by
// PolitenessIP with r (nil: net.DefaultResolver), through a cache of its
// own (DNSCacheSize names, each kept DNSTTL, a failure DNSFailTTL;
// concurrent lookups of one name share one). The first address r returns
// is the one keyed. It empties the cache.
func (l *Limiter) SetResolver(r Resolver) {
	if r == nil {
		r = net.DefaultResolver
	}
	l.dns.Store(&dnsCache{r: r, m: make(map[string]*dnsEntry)})
}

// resolver returns the Limiter's cache, making the default one on first use.
func (l *Limiter) resolver() *dnsCache {
	if c := l.dns.Load(); c != nil {
		return c
	}
	l.dns.CompareAndSwap(nil, &dnsCache{r: net.DefaultResolver, m: make(map[string]*dnsEntry)})
	return l.dns.Load()
}

// dnsCache is a bounded cache of lookups with a time to live.
type dnsCache struct {
	r Resolver
	// mu guards m.
	mu sync.Mutex
	m  map[string]*dnsEntry
}

// dnsEntry is one name's answer, or the lookup in flight for it.
type dnsEntry struct {
	// done is closed once addr, err and expires are set; they never
	// change after.
	done    chan struct{}
	addr    netip.Addr
	err     error
	expires time.Time
}

// lookup returns the address name resolves to, from the cache when a fresh
// answer is there. A failure is an error wrapping ErrResolve and a
// *net.DNSError; ctx ending returns ctx's error, and is not kept.
func (c *dnsCache) lookup(ctx context.Context, name string) (netip.Addr, error) {
	for {
		c.mu.Lock()
		e := c.m[name]
		if e != nil {
			select {
			case <-e.done:
				if time.Now().Before(e.expires) {
					c.mu.Unlock()
					return e.addr, e.err
				}
				delete(c.m, name)
				e = nil
			default:
			}
		}
		if e != nil {
			// Another caller is looking the name up: wait for its answer.
			c.mu.Unlock()
			select {
			case <-e.done:
				continue
			case <-ctx.Done():
				return netip.Addr{}, ctx.Err()
			}
		}
		e = &dnsEntry{done: make(chan struct{})}
		c.room()
		c.m[name] = e
		c.mu.Unlock()
		return c.fill(ctx, name, e)
	}
}

// fill looks name up for e, which it owns until done is closed.
func (c *dnsCache) fill(ctx context.Context, name string, e *dnsEntry) (netip.Addr, error) {
	addrs, err := c.r.LookupNetIP(ctx, "ip", name)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(e.done)
	if err != nil && ctx.Err() != nil {
		// This caller gave up: not the name's answer. Waiters look it up
		// again themselves.
		delete(c.m, name)
		e.err = ctx.Err()
		return netip.Addr{}, ctx.Err()
	}
	ttl := DNSTTL
	switch {
	case err != nil:
		e.err = resolveError(name, err)
	case len(addrs) == 0:
		e.err = resolveError(name, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true})
	default:
		e.addr = addrs[0].Unmap()
	}
	if e.err != nil {
		ttl = DNSFailTTL
	}
	e.expires = time.Now().Add(ttl)
	return e.addr, e.err
}

// resolveError is the error of a name that did not resolve: it wraps
// ErrResolve and a *net.DNSError, the resolver's own or one made around its
// error, so that callers branch on it as on any failed lookup.
func resolveError(name string, err error) error {
	if _, ok := errors.AsType[*net.DNSError](err); !ok {
		err = &net.DNSError{Err: err.Error(), Name: name, UnwrapErr: err}
	}
	return fmt.Errorf("%w: %w", ErrResolve, err)
}

// room makes space for one more name; called under mu. Past DNSCacheSize
// it drops answers that have expired, then others, down to 7/8 of the
// bound, so that the sweep costs O(1) per name amortised. Lookups in
// flight stay: their callers wait for them.
func (c *dnsCache) room() {
	if len(c.m) < DNSCacheSize {
		return
	}
	now := time.Now()
	for name, e := range c.m {
		select {
		case <-e.done:
			if !now.Before(e.expires) {
				delete(c.m, name)
			}
		default:
		}
	}
	for name, e := range c.m {
		if len(c.m) <= DNSCacheSize*7/8 {
			return
		}
		select {
		case <-e.done:
			delete(c.m, name)
		default:
		}
	}
}
