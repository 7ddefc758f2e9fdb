package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/dashboard"
)

// --ui serves the live page (package dashboard) while the crawl runs. Its
// address is bound before the crawl starts, so that a taken one is a usage
// error and nothing is fetched. A loopback address needs no token; any
// other gets the --ui-token, or a random one printed with the page's URL.
// The page's Stop ends the crawl as --max-duration does: the output is
// finished (-o renamed into place) and the exit status is 0.

// errStoppedFromPage is the cause of a crawl stopped from the live page.
var errStoppedFromPage = errors.New("stopped from the live page")

// uiServer is the live page's listener and, once the crawl starts, its
// server.
type uiServer struct {
	ln     net.Listener
	token  string
	srv    *http.Server
	page   *dashboard.Handler
	served chan struct{}
}

// uiFlags are --ui and --ui-token.
type uiFlags struct{ addr, token string }

// listen binds --ui's address ("PORT" alone means 127.0.0.1:PORT); nil
// without --ui.
func (f uiFlags) listen() (*uiServer, error) {
	addr, token := f.addr, f.token
	if addr == "" {
		if token != "" {
			return nil, usagef("--ui-token needs --ui")
		}
		return nil, nil
	}
	if _, err := strconv.Atoi(addr); err == nil {
		addr = net.JoinHostPort("127.0.0.1", addr)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--ui %q: want HOST:PORT or PORT: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usagef("--ui: %w", err)
	}
	if token == "" && !loopbackHost(host) {
		// Anyone on the network could steer the crawl without one.
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		token = hex.EncodeToString(b)
	}
	return &uiServer{ln: ln, token: token}, nil
}

// loopbackHost reports whether host names only the loopback interface.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// start serves the page for c; stop is what its Stop button does. It
// prints the page's URL.
func (u *uiServer) start(c *magpie.Collector, stop func() error, stderr io.Writer) {
	if u == nil {
		return
	}
	opts := []dashboard.Option{dashboard.OnStop(stop)}
	if u.token != "" {
		opts = append(opts, dashboard.Token(u.token))
	}
	u.page = dashboard.New(c, opts...)
	u.srv = &http.Server{Handler: u.page, ReadHeaderTimeout: 10 * time.Second}
	u.served = make(chan struct{})
	go func() {
		defer close(u.served)
		_ = u.srv.Serve(u.ln) // ErrServerClosed once the crawl is done
	}()
	fmt.Fprintf(stderr, "live page on %s\n", u.url())
}

// url is the page's address to open, with its token.
func (u *uiServer) url() string {
	addr := u.ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "localhost"
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	p := url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(addr.Port)), Path: "/"}
	if u.token != "" {
		p.RawQuery = url.Values{"token": {u.token}}.Encode()
	}
	return p.String()
}

// uiGrace is how long close lets requests in progress finish.
const uiGrace = 5 * time.Second

// close ends the page's event streams and stops the server, or only the
// listener when the crawl never started. Idempotent. Requests in progress
// get uiGrace to finish: the Stop button's own POST is one of them (the
// crawl it ends closes the page), and it must get its answer rather than
// a connection closed under it.
func (u *uiServer) close() {
	if u == nil {
		return
	}
	if u.srv == nil {
		_ = u.ln.Close()
		return
	}
	_ = u.page.Close()
	ctx, cancel := context.WithTimeout(context.Background(), uiGrace)
	defer cancel()
	if u.srv.Shutdown(ctx) != nil {
		_ = u.srv.Close()
	}
	<-u.served
}
