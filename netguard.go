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
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215): any IPv4 behind it
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
}

// Prefixes whose addresses carry an IPv4 address that a translator, tunnel
// or stack may connect to; the embedded address is checked as if dialled.
var (
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052 well-known prefix: last 32 bits
	compatPrefix     = netip.MustParsePrefix("::/96")           // IPv4-compatible (deprecated): last 32 bits
	translatedPrefix = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT IPv4-translated: last 32 bits
	sixToFourPrefix  = netip.MustParsePrefix("2002::/16")       // 6to4: bits 16-47
	teredoPrefix     = netip.MustParsePrefix("2001::/32")       // Teredo: server in bits 32-63, client inverted in the last 32
)

// DenyPrivateNetworks refuses connections to loopback, private (RFC 1918,
// fc00::/7), link-local, carrier-grade NAT, unspecified, multicast,
// documentation and reserved addresses, and to IPv6 addresses that embed
// such an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96
// and 64:ff9b:1::/48, 6to4, Teredo, IPv4-translated), except those in
// allow: a guard against server-side request forgery for crawlers fed URLs
// from the internet. The check runs on every connection the transport
// makes, so it covers redirects, robots.txt and DNS names that resolve (or
// rebind) to such addresses. A refused connection fails with a
// *BlockedAddressError (errors.Is ErrPrivateNetwork), which is not retried.
//
// It applies to *http.Transport transports (magpie's own, and one given to
// WithTransport or SetClient later), whatever dials for them:
//   - with no dial function of the user's, magpie dials and checks the
//     resolved address before connecting;
//   - a DialContext, Dial, DialTLSContext or DialTLS of the user's (a SOCKS
//     or mesh dialer, a custom resolver, uTLS, client certificates) is kept:
//     a target given as an IP literal is checked before it is called, and
//     the remote address of the connection it returns is checked before any
//     HTTP byte is written (for DialTLSContext, after the TLS handshake it
//     made); a connection whose remote address is not an IP address is
//     refused.
//
// Through a proxy (Transport.Proxy, or a dialer that tunnels), the checked
// address is the proxy's: a proxy on loopback or a private network must be
// named in allow, and allowing it also allows targets given as IP literals
// at that address; names are resolved by the proxy, whose own egress rules
// then apply. A RoundTripper that is not an *http.Transport is outside the
// guard. Off by default: tests and local crawls use loopback. `magpie crawl`
// turns it on.
func DenyPrivateNetworks(allow ...netip.Prefix) CollectorOption {
	return func(c *Collector) {
		c.shared.backend.setGuard(&netGuard{allow: allow})
	}
}

// netGuard decides which addresses may be dialled.
type netGuard struct{ allow []netip.Prefix }

// check returns a *BlockedAddressError for an "ip:port" address the guard
// refuses.
func (g *netGuard) check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read dialled address %q", ErrPrivateNetwork, address)
	}
	return g.checkAddr(ap.Addr())
}

// checkAddr returns a *BlockedAddressError for an address the guard refuses.
func (g *netGuard) checkAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	for _, p := range g.allow {
		if p.Contains(a) {
			return nil
		}
	}
	if denied(a) {
		return &BlockedAddressError{Addr: a}
	}
	for _, v4 := range embeddedIPv4(a) {
		if err := g.checkAddr(v4); err != nil {
			return &BlockedAddressError{Addr: a}
		}
	}
	return nil
}

// denied reports whether a is in a refused range by itself.
func denied(a netip.Addr) bool {
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range deniedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address a carries under a
// translation or tunnelling scheme, which a NAT64 gateway, a 6to4 relay or a
// dual stack may end up connecting to.
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte(b[12:16]))
	switch {
	case nat64Prefix.Contains(a), compatPrefix.Contains(a), translatedPrefix.Contains(a):
		return []netip.Addr{last}
	case sixToFourPrefix.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case teredoPrefix.Contains(a):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client)}
	}
	return nil
}

// dialFunc is the shape of http.Transport's DialContext and DialTLSContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// guard returns t with every dial path checking its address: t itself when
// it is magpie's own transport (not yet in use), or a clone of the user's.
func (g *netGuard) guard(t *http.Transport, own bool) *http.Transport {
	if !own {
		t = t.Clone()
	}
	plain, tls := t.DialContext, t.DialTLSContext
	// The deprecated Dial and DialTLS are still dial paths when a user sets them.
	//lint:ignore SA1019 see above
	if dial := t.Dial; plain == nil && dial != nil {
		plain = withContext(dial)
	}
	//lint:ignore SA1019 see above
	if dial := t.DialTLS; tls == nil && dial != nil {
		tls = withContext(dial)
	}
	//lint:ignore SA1019 replaced by the checked context versions below
	t.Dial, t.DialTLS = nil, nil
	if own || plain == nil {
		// magpie dials: the resolved address is checked before connecting.
		d := &net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
			Control: func(network, address string, _ syscall.RawConn) error {
				return g.check(address)
			},
		}
		t.DialContext = d.DialContext
	} else {
		t.DialContext = g.checked(plain)
	}
	if tls != nil {
		t.DialTLSContext = g.checked(tls)
	}
	return t
}

func withContext(dial func(network, addr string) (net.Conn, error)) dialFunc {
	return func(_ context.Context, network, addr string) (net.Conn, error) { return dial(network, addr) }
}

// checked wraps a dialer of the user's: an IP-literal target is checked
// before dialling, and the remote address of the connection it returns
// before the connection is handed to the transport.
func (g *netGuard) checked(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if a, err := netip.ParseAddr(host); err == nil {
				if err := g.checkAddr(a); err != nil {
					return nil, err
				}
			}
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := g.checkRemote(conn.RemoteAddr()); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// checkRemote checks the address a connection reached.
func (g *netGuard) checkRemote(ra net.Addr) error {
	switch a := ra.(type) {
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return g.checkAddr(ip)
		}
	case *net.UDPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return g.checkAddr(ip)
		}
	case nil:
		return fmt.Errorf("%w: the dialled connection has no remote address", ErrPrivateNetwork)
	}
	if ap, err := netip.ParseAddrPort(ra.String()); err == nil {
		return g.checkAddr(ap.Addr())
	}
	return fmt.Errorf("%w: cannot check the dialled connection's remote address %q", ErrPrivateNetwork, ra.String())
}
