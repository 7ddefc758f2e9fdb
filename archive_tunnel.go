package magpie

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	xproxy "golang.org/x/net/proxy"
)

// The transport would carry HTTPS through a proxy itself, making the TLS
// handshake over the tunnel where no recording connection sits above it.
// So, while archiving, a request for an https URL whose proxy function
// names a proxy is sent through a transport of that proxy's own, a clone
// of the collector's that asks no proxy for https URLs and whose TLS dial
// opens the tunnel, makes the handshake inside it and records above it.
// One transport per proxy keeps connections pooled per proxy, as the
// transport's own pool is.

// maxTunnelProxies bounds the transports kept, one per proxy URL: a proxy
// function that names a new proxy (or a new session in the proxy's user
// name) per request must not grow them without end. The oldest is dropped
// (its idle connections closed) to make room.
const maxTunnelProxies = 64

// archiveTunnels holds the tunnel transports of the collector's current
// archiving transport (base), by proxy URL.
type archiveTunnels struct {
	// mu guards base, byProxy and order.
	mu      sync.Mutex
	base    *http.Transport
	byProxy map[string]*http.Transport
	order   []string // proxy URLs, oldest first
}

// through returns the client hreq is to be sent with: client itself, or,
// for an https URL that client's archiving transport would send through a
// proxy, a copy of client with that proxy's tunnel transport. The proxy
// function is asked here, once; its error is the request's, as the
// transport would return it.
func (a *archiveTunnels) through(client *http.Client, hreq *http.Request) (*http.Client, error) {
	t, ok := client.Transport.(*http.Transport)
	if !ok || t.Proxy == nil || hreq.URL.Scheme != "https" {
		return client, nil
	}
	if _, marked := t.TLSNextProto[archiveMark]; !marked {
		return client, nil
	}
	p, err := t.Proxy(hreq)
	if err != nil {
		// As http.Client.Do reports a proxy function's error.
		op := "Get"
		if m := hreq.Method; m != "" {
			op = m[:1] + strings.ToLower(m[1:])
		}
		return nil, &url.Error{Op: op, URL: hreq.URL.Redacted(), Err: err}
	}
	if p == nil {
		return client, nil
	}
	n := *client
	n.Transport = a.transport(t, p)
	return &n, nil
}

// transport returns the tunnel transport of base through proxy p.
func (a *archiveTunnels) transport(base *http.Transport, p *url.URL) *http.Transport {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.base != base {
		for _, t := range a.byProxy {
			t.CloseIdleConnections()
		}
		a.base, a.byProxy, a.order = base, make(map[string]*http.Transport), nil
	}
	key := p.String()
	if t, ok := a.byProxy[key]; ok {
		return t
	}
	if len(a.order) >= maxTunnelProxies {
		old := a.order[0]
		a.order = a.order[1:]
		a.byProxy[old].CloseIdleConnections()
		delete(a.byProxy, old)
	}
	t := tunnelTransport(base, p)
	a.byProxy[key] = t
	a.order = append(a.order, key)
	return t
}

// tunnelTransport returns a clone of the archiving transport base that
// sends https requests through proxy p, recording above the TLS it makes
// inside the tunnel, and every other request as base does.
func tunnelTransport(base *http.Transport, p *url.URL) *http.Transport {
	t := base.Clone()
	proxy := base.Proxy
	t.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Scheme == "https" {
			return nil, nil // the TLS dial below tunnels through p
		}
		return proxy(r)
	}
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dialTunnel(ctx, base, p, addr)
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			_ = raw.Close()
			return nil, err
		}
		return recordTLS(ctx, raw, base.TLSClientConfig, host)
	}
	return t
}

// proxyConnectTimeout bounds a CONNECT exchange with a proxy that accepted
// the connection but does not answer, as net/http bounds its own.
const proxyConnectTimeout = time.Minute

// dialTunnel opens a connection to addr through proxy p, dialled with
// base's dials (the guard of DenyPrivateNetworks checks the proxy's
// address), unrecorded: the exchanges inside are recorded above the TLS the
// caller makes.
func dialTunnel(ctx context.Context, base *http.Transport, p *url.URL, addr string) (net.Conn, error) {
	switch p.Scheme {
	case "socks5", "socks5h":
		d, err := xproxy.FromURL(p, tunnelDialer{base})
		if err != nil {
			return nil, err
		}
		return d.(xproxy.ContextDialer).DialContext(ctx, "tcp", addr)
	case "http", "https":
	default:
		return nil, fmt.Errorf("magpie: proxy %s: unsupported scheme %q", p.Redacted(), p.Scheme)
	}
	port := p.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.Scheme]
	}
	paddr := net.JoinHostPort(p.Hostname(), port)
	var conn net.Conn
	var err error
	if p.Scheme == "https" {
		conn, err = base.DialTLSContext(ctx, "tcp", paddr)
	} else {
		conn, err = base.DialContext(ctx, "tcp", paddr)
	}
	if err != nil {
		return nil, &net.OpError{Op: "proxyconnect", Net: "tcp", Err: err}
	}
	conn = unrecorded(conn)
	if err := connectTunnel(ctx, base, conn, p, addr); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// connectTunnel asks the HTTP proxy p on conn for a tunnel to addr, as
// net/http does: CONNECT with the transport's proxy headers and the
// proxy's credentials, and only a 200 opens it.
func connectTunnel(ctx context.Context, base *http.Transport, conn net.Conn, p *url.URL, addr string) error {
	hdr := base.ProxyConnectHeader
	if base.GetProxyConnectHeader != nil {
		var err error
		if hdr, err = base.GetProxyConnectHeader(ctx, p, addr); err != nil {
			return err
		}
	}
	hdr = hdr.Clone()
	if hdr == nil {
		hdr = make(http.Header)
	}
	if u := p.User; u != nil {
		pw, _ := u.Password()
		hdr.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: hdr}
	// A context that ends, or a proxy that never answers, ends the wait:
	// the connection is closed under the reads.
	deadline := time.Now().Add(proxyConnectTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := req.Write(conn); err != nil {
		return ctxErr(ctx, err)
	}
	// A TLS server speaks only once spoken to: nothing of the tunnel is
	// read past the answer.
	limit := base.MaxResponseHeaderBytes
	if limit <= 0 {
		limit = 10 << 20 // net/http's default
	}
	resp, err := http.ReadResponse(bufio.NewReader(&io.LimitedReader{R: conn, N: limit}), req)
	if err != nil {
		return ctxErr(ctx, err)
	}
	_ = conn.SetDeadline(time.Time{})
	if base.OnProxyConnectResponse != nil {
		if err := base.OnProxyConnectResponse(ctx, p, req, resp); err != nil {
			return err
		}
	}
	if resp.StatusCode != http.StatusOK {
		_, text, ok := strings.Cut(resp.Status, " ")
		if !ok {
			return errors.New("unknown status code")
		}
		return errors.New(text)
	}
	return nil
}

// ctxErr is ctx's error when it ended, else err.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// unrecorded is the connection under a recording one: the bytes that open
// a tunnel are not an exchange of the crawl.
func unrecorded(c net.Conn) net.Conn {
	if rc, ok := c.(*recordConn); ok {
		return rc.Conn
	}
	return c
}

// tunnelDialer dials a SOCKS5 proxy with an archiving transport's dial.
type tunnelDialer struct{ base *http.Transport }

func (d tunnelDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d tunnelDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.base.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return unrecorded(c), nil
}
