package magpie

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrPrivateNetwork is matched (errors.Is) by the error of a connection that
// DenyPrivateNetworks refused.
var ErrPrivateNetwork = errors.New("magpie: address in a private network refused")

// BlockedAddressError is the error of a connection that DenyPrivateNetworks
// refused: the address the name resolved to, or that a redirect named.
type BlockedAddressError struct {
	Addr netip.Addr
}

func (e *BlockedAddressError) Error() string {
	allow := "give DenyPrivateNetworks a prefix that contains it to allow it"
	if e.Addr.IsLoopback() {
		allow = "a loopback address: allow loopback with DenyPrivateNetworks(netip.MustParsePrefix(\"127.0.0.0/8\"), netip.MustParsePrefix(\"::1/128\"))"
	}
	return fmt.Sprintf("%v: %s (DenyPrivateNetworks; %s)", ErrPrivateNetwork, e.Addr, allow)
}

// Is makes errors.Is(err, ErrPrivateNetwork) true.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrPrivateNetwork }

// deniedPrefixes are the networks DenyPrivateNetworks refuses, besides what
// netip.Addr's own predicates cover (loopback, private, link-local,
// unspecified, multicast).
var deniedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// DenyPrivateNetworks refuses connections to loopback, private (RFC 1918,
// fc00::/7), link-local, carrier-grade NAT, unspecified, multicast and
// reserved addresses, except those in allow: a guard against server-side
// request forgery for crawlers fed URLs from the internet. The check runs
// when a connection is dialled, on the address a name resolved to, so it
// covers redirects, robots.txt and DNS names that resolve (or rebind) to
// such addresses. A refused connection fails with a *BlockedAddressError
// (errors.Is ErrPrivateNetwork), which is not retried.
//
// It applies to *http.Transport transports (magpie's own, and one given to
// WithTransport or SetClient later); a connection through an HTTP proxy is
// checked against the proxy's address, not the target's. Off by default:
// tests and local crawls use loopback. `magpie crawl` turns it on.
func DenyPrivateNetworks(allow ...netip.Prefix) CollectorOption {
	return func(c *Collector) {
		c.shared.backend.setGuard(&netGuard{allow: allow})
	}
}

// netGuard decides which addresses may be dialled.
type netGuard struct{ allow []netip.Prefix }

// check returns a *BlockedAddressError for an address the guard refuses.
func (g *netGuard) check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read dialled address %q", ErrPrivateNetwork, address)
	}
	a := ap.Addr().Unmap()
	for _, p := range g.allow {
		if p.Contains(a) {
			return nil
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return &BlockedAddressError{Addr: a}
	}
	for _, p := range deniedPrefixes {
		if p.Contains(a) {
			return &BlockedAddressError{Addr: a}
		}
	}
	return nil
}

// guard returns t with its dialer checking every address, t itself when it
// is magpie's own transport (not yet in use), or a clone of the user's.
func (g *netGuard) guard(t *http.Transport, own bool) *http.Transport {
	if !own {
		t = t.Clone()
	}
	d := &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			return g.check(address)
		},
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return t
}
