package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/magpiecrawl/magpie"
)

// netFlags are the flags that say which networks and certificates the
// crawl may reach.
type netFlags struct {
	allowPrivate []string
	insecure     bool
}

// intranet is what --allow-private without a value allows: the intranet
// ranges (RFC 1918, and IPv6 unique local addresses).
var intranet = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"}

func (f *netFlags) add(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.allowPrivate, "allow-private", nil, "allow private `networks`: alone (or =intranet) 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 and fc00::/7; =CIDR,... (or addresses) only those")
	fs.Lookup("allow-private").NoOptDefVal = "intranet"
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify TLS certificates (self-signed or expired ones, wrong names)")
}

// allowedPrefixes are the networks the private-network guard lets
// through: loopback with --allow-loopback, the --allow-private ones.
func allowedPrefixes(allowLoopback bool, private []string) ([]netip.Prefix, error) {
	var allow []netip.Prefix
	if allowLoopback {
		allow = append(allow, loopback...)
	}
	for _, s := range private {
		s = strings.TrimSpace(s)
		if s == "intranet" {
			p, err := allowedPrefixes(false, intranet)
			if err != nil {
				return nil, err
			}
			allow = append(allow, p...)
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			allow = append(allow, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, usagef("--allow-private %q: want a network (10.0.0.0/8) or an address", s)
		}
		allow = append(allow, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return allow, nil
}

// proxyWithScheme gives a proxy written host:port the http:// scheme, as
// curl does.
func proxyWithScheme(p string) string {
	if p == "" || strings.Contains(p, "://") {
		return p
	}
	return "http://" + p
}

// trustProxy returns the addresses of the --proxy host, which the guard
// lets through: the proxy is the user's own choice, and every connection
// goes to it (names are resolved by the proxy).
func trustProxy(ctx context.Context, proxy string) ([]netip.Prefix, error) {
	u, err := url.Parse(proxy)
	if err != nil || u.Hostname() == "" {
		return nil, usagef("--proxy %q: want a URL such as http://127.0.0.1:3128, or host:port", proxy)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("--proxy %s: %w", u.Redacted(), err)
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// insecureTransport is a transport like magpie's own that does not verify
// certificates (--insecure).
func insecureTransport() *http.Transport {
	t := magpie.NewTransport()
	t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // what --insecure asks for
	return t
}

// networkSetup applies the network flags to c: --insecure, then --proxy
// (which must come after the transport it clones).
func networkSetup(c *magpie.Collector, cfg crawlConfig) error {
	if cfg.insecure {
		c.WithTransport(insecureTransport())
	}
	if cfg.proxy != "" {
		if err := c.SetProxy(cfg.proxy); err != nil {
			return usagef("--proxy: %w", err)
		}
	}
	return nil
}

// describe is err's text for the command line: without the "Get URL"
// that the line names already, and with library errors that speak Go
// (options to pass, calls to make) said in flags.
func describe(err error, proxy string) string {
	if err == nil {
		return ""
	}
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && isProxyOp(opErr.Op) {
		inner := opErr.Err
		if inner == nil {
			inner = opErr
		}
		return fmt.Sprintf("proxy %s (--proxy) cannot be reached: %s", redactProxy(proxy), describe(inner, ""))
	}
	if blocked, ok := errors.AsType[*magpie.BlockedAddressError](err); ok {
		return fmt.Sprintf("address %s is in a private network: refused", blocked.Addr)
	}
	return err.Error()
}

// redactProxy hides a proxy URL's password.
func redactProxy(p string) string {
	if u, err := url.Parse(p); err == nil && u.Host != "" {
		return u.Redacted()
	}
	return p
}

// networkHint suggests the flag that lifts a network refusal, or "".
func networkHint(err error) string {
	var opErr *net.OpError
	if errors.As(err, &opErr) && isProxyOp(opErr.Op) {
		return "" // describe named --proxy
	}
	if blocked, ok := errors.AsType[*magpie.BlockedAddressError](err); ok {
		if blocked.Addr.IsLoopback() {
			return " (pass --allow-loopback to crawl 127.0.0.0/8 and ::1)"
		}
		return fmt.Sprintf(" (pass --allow-private to crawl 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 and fc00::/7, or --allow-private=%s for this address alone)", blocked.Addr)
	}
	if errors.Is(err, magpie.ErrPrivateNetwork) {
		return " (private networks are refused; see --allow-loopback and --allow-private)"
	}
	if isCertificate(err) {
		return " (pass --insecure to skip certificate verification)"
	}
	return ""
}
