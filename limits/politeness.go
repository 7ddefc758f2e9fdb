package limits

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Politeness says which hosts share one slot of a Gate: one Parallelism,
// one Delay and RandomDelay, one Crawl-delay, AutoThrottle delay and
// Retry-After or back-off hold. A Rule's PolitenessBy sets it for the hosts
// the rule matches; the Limiter's default (PolitenessBy option,
// SetPoliteness) for the rest. The zero value, PolitenessDefault, is the
// Limiter's default, which is PolitenessHost unless set.
type Politeness uint8

const (
	// PolitenessDefault (the zero value) takes the Limiter's default: per
	// host unless SetPoliteness chose otherwise.
	PolitenessDefault Politeness = iota
	// PolitenessHost keys each host:port on its own, as url.URL.Host
	// names it: a.example.com and b.example.com, or two ports of one
	// host, are crawled apart. The behaviour of a Limiter that sets
	// nothing.
	PolitenessHost
	// PolitenessDomain keys hosts by their registrable domain (the public
	// suffix list's eTLD+1, ports ignored): a.example.com:443 and
	// b.example.com:8080 share one slot, as do a.example.co.uk and
	// example.co.uk. A host that is an IP address, or that has no
	// registrable domain (localhost, a bare public suffix), keys as
	// itself, as with PolitenessHost.
	PolitenessDomain
	// PolitenessIP keys hosts by the address their name resolves to
	// (ports ignored), so hundreds of names on one shared server or CDN
	// edge share its one slot. Names are resolved by the Limiter's
	// Resolver through a small cache (see SetResolver) when their
	// requests enter the Gate; the Ticket says which address was keyed
	// (Ticket.Addr), for the caller to connect to that one. A name that
	// does not resolve fails Gate.Put and Limiter.Acquire with an error
	// wrapping ErrResolve and a *net.DNSError; it is never filed under a
	// shared key of unknowns.
	PolitenessIP

	maxPoliteness = PolitenessIP
)

// String returns "default", "host", "domain" or "ip".
func (p Politeness) String() string {
	switch p {
	case PolitenessDefault:
		return "default"
	case PolitenessHost:
		return "host"
	case PolitenessDomain:
		return "domain"
	case PolitenessIP:
		return "ip"
	}
	return "Politeness(" + strconv.Itoa(int(p)) + ")"
}

// valid reports whether p is one of the constants, returning an error
// wrapping ErrBadPoliteness otherwise.
func (p Politeness) valid() error {
	if p > maxPoliteness {
		return fmt.Errorf("%w: %v", ErrBadPoliteness, p)
	}
	return nil
}

// ParsePoliteness reads "host", "domain" or "ip" (any case), as a command
// line gives them; anything else is an error wrapping ErrBadPoliteness.
func ParsePoliteness(s string) (Politeness, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "host":
		return PolitenessHost, nil
	case "domain":
		return PolitenessDomain, nil
	case "ip":
		return PolitenessIP, nil
	}
	return 0, fmt.Errorf("%w: %q (want host, domain or ip)", ErrBadPoliteness, s)
}

// PolitenessBy sets the Limiter's default politeness, for the hosts whose
// rule leaves PolitenessBy at PolitenessDefault and the hosts no rule
// matches. An invalid p keeps the default; SetPoliteness reports it.
func PolitenessBy(p Politeness) Option {
	return func(l *Limiter) { _ = l.SetPoliteness(p) }
}

// SetPoliteness sets the Limiter's default politeness (see PolitenessBy);
// PolitenessDefault goes back to PolitenessHost. It returns an error
// wrapping ErrBadPoliteness, and changes nothing, when p is not one of the
// constants. It applies to requests put into a Gate from then on; those
// parked keep their slot.
func (l *Limiter) SetPoliteness(p Politeness) error {
	if err := p.valid(); err != nil {
		return err
	}
	l.by.Store(uint32(p))
	return nil
}

// Politeness returns the Limiter's default politeness (PolitenessHost when
// none was set).
func (l *Limiter) Politeness() Politeness {
	if p := Politeness(l.by.Load()); p != PolitenessDefault {
		return p
	}
	return PolitenessHost
}

// keying reports whether some host may be keyed other than by itself, so
// that the usual Limiter keys every host by itself with two atomic loads.
func (l *Limiter) keying() bool {
	if l.ruleKeys.Load() {
		return true
	}
	p := Politeness(l.by.Load())
	return p == PolitenessDomain || p == PolitenessIP
}

// slotKey is what a Gate files a host's request under: the key, and for a
// key other than the host itself (a domain or an address), the rule that
// applies to every host on it and the address keyed.
type slotKey struct {
	key string
	// joint is set for a domain or address key; ent is then its rule.
	joint bool
	ent   *entry
	addr  netip.Addr
}

// keyOf returns the slot host's requests go to. Only PolitenessIP does I/O
// (a lookup through the cache, outside every lock). The key of a domain or
// an address carries its rule's position, so that hosts sharing it have
// one rule and the key names the slot in a Shared store the same way in
// every process that adds the same rules.
func (l *Limiter) keyOf(ctx context.Context, host string) (slotKey, error) {
	if !l.keying() {
		return slotKey{key: host}, nil
	}
	e, _ := l.lookup(host)
	by := PolitenessDefault
	if e != nil {
		by = e.by
	}
	if by == PolitenessDefault {
		by = l.Politeness()
	}
	name := lower(hostname(host))
	switch by {
	case PolitenessDomain:
		if _, err := netip.ParseAddr(name); err == nil {
			return slotKey{key: host}, nil
		}
		d, err := publicsuffix.EffectiveTLDPlusOne(strings.TrimSuffix(name, "."))
		if err != nil || d == "" {
			return slotKey{key: host}, nil
		}
		return slotKey{key: jointKey("domain:", d, e), joint: true, ent: e}, nil
	case PolitenessIP:
		a, err := netip.ParseAddr(name)
		if err != nil {
			if a, err = l.resolver().lookup(ctx, name); err != nil {
				return slotKey{}, err
			}
		}
		return slotKey{key: jointKey("ip:", a.String(), e), joint: true, ent: e, addr: a}, nil
	}
	return slotKey{key: host}, nil
}

// jointKey is "domain:example.com" or "ip:192.0.2.1", with "#n" after it
// when the n-th rule added applies: hosts under different rules keep
// different slots, each with its own rule's limits. Neither form can be a
// host:port, so no host's own key is ever taken.
func jointKey(kind, name string, e *entry) string {
	if e == nil {
		return kind + name
	}
	return kind + name + "#" + strconv.Itoa(e.pos)
}
