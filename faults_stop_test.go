package magpie

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lateServer serves pages of links to new pages and records every request
// that reaches a handler after the test called stopped. Its connections are
// tracked, so that the test can wait until the server has read everything
// the client sent (every connection closed) before it counts.
type lateServer struct {
	*httptest.Server
	hits      atomic.Int64
	stopped   atomic.Bool
	late      atomic.Int64
	lateMu    sync.Mutex
	latePaths []string
	reached   chan struct{} // closed at the threshold'th request
	connMu    sync.Mutex
	conns     map[net.Conn]bool
	connsGone chan struct{} // signalled when conns becomes empty
}

func newLateServer(t *testing.T, threshold int64) *lateServer {
	s := &lateServer{reached: make(chan struct{}), conns: map[net.Conn]bool{}, connsGone: make(chan struct{}, 1)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.stopped.Load() {
			s.late.Add(1)
			s.lateMu.Lock()
			s.latePaths = append(s.latePaths, r.URL.Path)
			s.lateMu.Unlock()
		}
		if s.hits.Add(1) == threshold {
			close(s.reached)
		}
		w.Header().Set("Content-Type", "text/html")
		for i := range 10 {
			fmt.Fprintf(w, `<a href="%s/%d">l</a>`, r.URL.Path, i)
		}
	}))
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		s.connMu.Lock()
		defer s.connMu.Unlock()
		switch st {
		case http.StateNew:
			s.conns[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(s.conns, c)
			if len(s.conns) == 0 {
				select {
				case s.connsGone <- struct{}{}:
				default:
				}
			}
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// settle waits until the server has closed every connection (the client's
// are closed by the caller), so that any request the client wrote has been
// read and handled.
func (s *lateServer) settle(t *testing.T) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.connMu.Lock()
		n := len(s.conns)
		s.connMu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-s.connsGone:
		case <-deadline:
			t.Fatalf("server still has %d connections open 30s after the client closed its own", n)
		}
	}
}

// TestNothingStartsAfterStop: once Stop has returned, no request of the
// crawl reaches the server, not even one written to a connection just before
// the crawl was cancelled.
func TestNothingStartsAfterStop(t *testing.T) {
	for round := range 20 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			s := newLateServer(t, 40)
			// A long grace: on a loaded machine a request may take a while
			// to be answered, and one cancelled could still be read later.
			c := NewCollector(IgnoreRobotsTxt(), Async(), Workers(8), StopGrace(30*time.Second))
			var stopRet atomic.Bool
			var lateWrites atomic.Int64
			tr := NewTransport()
			d := &net.Dialer{}
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				cn, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &watchConn{Conn: cn, after: &stopRet, n: &lateWrites}, nil
			}
			c.WithTransport(tr)
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			if err := c.Visit(s.URL + "/p"); err != nil {
				t.Fatalf("Visit() error = %v", err)
			}
			select {
			case <-s.reached:
			case <-time.After(30 * time.Second):
				t.Fatal("crawl did not reach 40 requests in 30s")
			}
			if err := c.Stop(); err != nil {
				t.Errorf("Stop() error = %v, want nil", err)
			}
			stopRet.Store(true)
			s.stopped.Store(true)
			c.shared.backend.get().CloseIdleConnections()
			s.settle(t)
			if n := lateWrites.Load(); n > 0 {
				t.Errorf("%d writes to a connection after Stop returned", n)
			}
			if n := s.late.Load(); n > 0 {
				s.lateMu.Lock()
				defer s.lateMu.Unlock()
				t.Errorf("%d requests reached the server after Stop returned: %v", n, s.latePaths)
			}
		})
	}
}

// watchConn counts writes made once after is set.
type watchConn struct {
	net.Conn
	after *atomic.Bool
	n     *atomic.Int64
}

func (w *watchConn) Write(b []byte) (int, error) {
	if w.after.Load() {
		w.n.Add(1)
	}
	return w.Conn.Write(b)
}
