package magpie

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/magpiecrawl/magpie/limits"
)

// PolitenessBy sets which hosts share one politeness slot (one Parallelism,
// Delay, Crawl-delay, AutoThrottle and Retry-After or back-off hold), for
// the hosts whose LimitRule leaves PolitenessBy unset and those no rule
// matches: limits.PolitenessHost (the default: each host:port alone),
// limits.PolitenessDomain (each registrable domain) or limits.PolitenessIP
// (each address the names resolve to, so that hundreds of names on one
// shared server get its one Delay). robots.txt stays per host. A value that
// is not one of the constants is returned, wrapping limits.ErrBadPoliteness,
// by the Visit or queue run that would start a crawl (and logged at Warn);
// a LimitRule's PolitenessBy is checked by Limit, which returns the error.
// Shared with clones.
//
// Under limits.PolitenessIP a host's name is looked up (through a small
// cache, see Resolver) when its requests enter the politeness gate, and the
// connection goes to the address that was keyed, through the collector's
// dialer or a DialContext of the user's (given "ip:port"), so the
// DenyPrivateNetworks guard checks that same address. A DialTLSContext of
// the user's, a proxy and a Fetcher reach the host their own way. A name
// that does not resolve fails its requests to OnError with the lookup's
// *net.DNSError (errors.Is limits.ErrResolve), as a dial would.
func PolitenessBy(p limits.Politeness) CollectorOption {
	return func(c *Collector) {
		if err := c.shared.limiter.SetPoliteness(p); err != nil {
			c.politenessErr = err
			c.logger.Warn("PolitenessBy refused", "err", err)
			return
		}
		c.politenessErr = nil
		if c.shared.limiter.Politeness() == limits.PolitenessIP {
			c.shared.backend.pinDials()
		}
	}
}

// Resolver makes the collector look names up with r where it keys hosts by
// address (limits.PolitenessIP); the default is net.DefaultResolver. The
// answers are cached (limits.DNSCacheSize names, limits.DNSTTL each, a
// failure limits.DNSFailTTL). Shared with clones; nil restores the default.
func Resolver(r limits.Resolver) CollectorOption {
	return func(c *Collector) { c.shared.limiter.SetResolver(r) }
}

// pinRules turns dial pinning on when a rule keys its hosts by address.
func (c *Collector) pinRules(rules ...*LimitRule) {
	for _, r := range rules {
		if r != nil && r.PolitenessBy == limits.PolitenessIP {
			c.shared.backend.pinDials()
			return
		}
	}
}

// pinDials makes every connection of a request keyed by address go to that
// address (see dialPin).
func (b *httpBackend) pinDials() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pin {
		return
	}
	b.pin, b.guarded = true, nil
	b.applyGuard()
}

// dialPin is the address a request's host was keyed by in the politeness
// gate (limits.Ticket.Addr): its connections go there, not to whatever a
// second lookup of the name would answer.
type dialPin struct {
	host string // the URL's hostname, as the transport dials it
	addr netip.Addr
}

// dialPinKey keys a dialPin in a request's context.
type dialPinKey struct{}

// pinOf returns the pin of a request to u holding t, if its host was keyed
// by address.
func pinOf(u *url.URL, t *limits.Ticket) (dialPin, bool) {
	a := t.Addr()
	if !a.IsValid() {
		return dialPin{}, false
	}
	return dialPin{host: u.Hostname(), addr: a}, true
}

// pinTransport returns a clone of t whose plain dials (DialContext, or
// Dial) connect a pinned host to its address; a dial to any other host,
// or one with no pin in its context, is left as it was.
func pinTransport(t *http.Transport) *http.Transport {
	t = t.Clone()
	dial := t.DialContext
	//lint:ignore SA1019 a Dial of the user's is still their dial path
	if d := t.Dial; dial == nil && d != nil {
		dial = withContext(d)
		//lint:ignore SA1019 replaced by the pinned context version below
		t.Dial = nil
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext // what a Transport without one uses
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := ctx.Value(dialPinKey{}).(dialPin); ok {
			if host, port, err := net.SplitHostPort(addr); err == nil && strings.EqualFold(host, p.host) {
				addr = net.JoinHostPort(p.addr.String(), port)
			}
		}
		return dial(ctx, network, addr)
	}
	return t
}
