package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// runOneListener is run for -loopback -one-listener: one listener on the
// wildcard address serves every host, found by the loopback address each
// connection was made to. A site of 20,000 hosts would otherwise need
// 20,000 listeners, past a usual open-file limit before any connection.
func runOneListener(ctx context.Context, cfg config) error {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	bases := make([]string, cfg.hosts)
	for h := range bases {
		bases[h] = "http://" + net.JoinHostPort(loopbackAddr(h), port)
	}
	gen := newGenerator(cfg, bases)
	st := newSiteStats(cfg, bases, gen)
	handlers := make([]http.Handler, cfg.hosts)
	for h := range handlers {
		handlers[h] = handler(cfg, gen, st, h)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ci, _ := r.Context().Value(connKey{}).(*connInfo)
			if ci == nil || ci.host < 0 {
				http.NotFound(w, r)
				return
			}
			handlers[ci.host].ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ci := &connInfo{host: -1}
			if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil {
				if h, ok := loopbackIndex(ap.Addr()); ok && h < cfg.hosts {
					ci.host = h
				}
			}
			return context.WithValue(ctx, connKey{}, ci)
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(loopbackOnly{ln}) }()
	fmt.Println(strings.Join(bases, " "))
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// loopbackOnly closes, as soon as they are accepted, connections made to an
// address outside 127.0.0.0/8: the wildcard listener is for the loopback
// hosts only.
type loopbackOnly struct{ net.Listener }

func (l loopbackOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ap, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil && ap.Addr().Unmap().IsLoopback() {
			return c, nil
		}
		_ = c.Close()
	}
}

// loopbackIndex is the host whose loopbackAddr is a; ok is false for an
// address loopbackAddr never gives.
func loopbackIndex(a netip.Addr) (int, bool) {
	if !a.Unmap().Is4() {
		return 0, false
	}
	b := a.Unmap().As4()
	if b[0] != 127 || b[1] < 1 || b[1] > 126 || b[2] < 1 || b[2] > 254 || b[3] < 1 || b[3] > 254 {
		return 0, false
	}
	return (int(b[1])-1)*254*254 + (int(b[2])-1)*254 + int(b[3]) - 1, true
}
