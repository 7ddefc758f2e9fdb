package magpie

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// callbackSpy counts a collector's OnRequest, OnError and OnRefused calls
// and keeps their errors.
type callbackSpy struct {
	mu       sync.Mutex
	requests map[string]int
	errs     map[string][]error
	refused  map[string][]error
}

func spyOn(c *Collector) *callbackSpy {
	s := &callbackSpy{requests: map[string]int{}, errs: map[string][]error{}, refused: map[string][]error{}}
	c.OnRequest(func(r *Request) {
		s.mu.Lock()
		s.requests[r.URL.Path]++
		s.mu.Unlock()
	})
	c.OnError(func(r *Response, err error) {
		s.mu.Lock()
		s.errs[r.Request.URL.Path] = append(s.errs[r.Request.URL.Path], err)
		s.mu.Unlock()
	})
	c.OnRefused(func(r *Request, err error) {
		s.mu.Lock()
		s.refused[r.URL.Path] = append(s.refused[r.URL.Path], err)
		s.mu.Unlock()
	})
	return s
}

func (s *callbackSpy) get(path string) (requests int, errs, refused []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path], s.errs[path], s.refused[path]
}

// refusedPort returns a loopback address on which nothing listens.
func refusedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// noSuchHost is a transport whose every dial fails as a DNS lookup of an
// unknown name does, so that no resolver is asked.
func noSuchHost() *http.Transport {
	return &http.Transport{DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}}
}

// TestHostDownReachesOnError: a request whose host cannot be reached
// (connection refused, DNS failure, TLS failure) runs OnRequest once and
// reaches OnError once with that network error, with robots.txt obeyed or
// not; it is not refused, and robots.txt is not fetched again and again.
func TestHostDownReachesOnError(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "secret")
	}))
	defer tlsSrv.Close()
	for _, tt := range []struct {
		name string
		url  string
		set  func(*Collector)
		is   func(error) bool
	}{
		{"connection refused", "http://" + refusedPort(t) + "/page", nil,
			func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"DNS failure", "http://no-such-host.test/page", func(c *Collector) { c.WithTransport(noSuchHost()) },
			func(err error) bool { _, ok := errors.AsType[*net.DNSError](err); return ok }},
		{"TLS failure", tlsSrv.URL + "/page", nil,
			func(err error) bool { _, ok := errors.AsType[*tls.CertificateVerificationError](err); return ok }},
	} {
		for _, robots := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/robots=%v", tt.name, robots), func(t *testing.T) {
				var opts []CollectorOption
				if !robots {
					opts = append(opts, IgnoreRobotsTxt())
				}
				c := NewCollector(opts...)
				if tt.set != nil {
					tt.set(c)
				}
				spy := spyOn(c)
				err := c.Visit(tt.url)
				if !tt.is(err) {
					t.Errorf("Visit(%q) error = %v, want the network error", tt.url, err)
				}
				requests, errs, refused := spy.get("/page")
				if requests != 1 {
					t.Errorf("OnRequest ran %d times, want 1", requests)
				}
				if len(errs) != 1 || !tt.is(errs[0]) {
					t.Errorf("OnError got %v, want the network error once", errs)
				}
				if len(refused) != 0 {
					t.Errorf("OnRefused got %v, want nothing (the host is down, nothing was refused)", refused)
				}
				st := c.Stats()
				if n := st.RobotsFetches; robots && n != 1 {
					t.Errorf("Stats().RobotsFetches = %d, want 1 (no robots.txt retries for a host that is down)", n)
				}
				if len(st.Refused) != 0 {
					t.Errorf("Stats().Refused = %v, want none", st.Refused)
				}
			})
		}
	}
}

// TestHostDownManyRequests: every request to a host that is down fails at
// once, each with one OnRequest and one OnError; none waits for robots.txt
// retries and none is refused.
func TestHostDownManyRequests(t *testing.T) {
	base := "http://" + refusedPort(t)
	c := NewCollector(Async())
	spy := spyOn(c)
	const n = 20
	for i := range n {
		if err := c.Visit(fmt.Sprintf("%s/p%d", base, i)); err != nil {
			t.Fatalf("Visit() error = %v, want nil (async)", err)
		}
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(robotsRetryBase * 30):
		t.Fatal("the crawl of a host that is down did not end")
	}
	for i := range n {
		p := fmt.Sprintf("/p%d", i)
		requests, errs, refused := spy.get(p)
		if requests != 1 || len(errs) != 1 || !errors.Is(errs[0], syscall.ECONNREFUSED) || len(refused) != 0 {
			t.Errorf("%s: OnRequest %d, OnError %v, OnRefused %v; want 1, connection refused once, none", p, requests, errs, refused)
		}
	}
}

// TestHostDownRetried: with a RetryPolicy, each try of a request to a host
// that is down is a real attempt to reach it (robots.txt is asked again, not
// taken as down from the try before), with one OnRequest per try and the
// final failure once to OnError.
func TestHostDownRetried(t *testing.T) {
	u := "http://" + refusedPort(t) + "/page"
	c := NewCollector(RetryPolicy(RetryOptions{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}))
	spy := spyOn(c)
	err := c.Visit(u)
	var re *RetryError
	if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Visit() error = %v, want a *RetryError of 3 attempts wrapping connection refused", err)
	}
	requests, errs, refused := spy.get("/page")
	if requests != 3 || len(errs) != 1 || len(refused) != 0 {
		t.Errorf("OnRequest %d, OnError %v, OnRefused %v; want 3, one error, none", requests, errs, refused)
	}
	if n := c.Stats().RobotsFetches; n != 3 {
		t.Errorf("Stats().RobotsFetches = %d, want 3 (one per try)", n)
	}
}

// TestRobotsRetriesRunNoCallbacks: a request waiting while its host's
// robots.txt answers 5xx (RFC 9309 retries) runs OnRequest once, when it is
// finally sent.
func TestRobotsRetriesRunNoCallbacks(t *testing.T) {
	var robots atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if robots.Add(1) < 3 {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
			return
		}
		fmt.Fprint(w, "page")
	}))
	defer srv.Close()
	c := NewCollector()
	c.shared.robots.retryBase = time.Millisecond
	spy := spyOn(c)
	if err := c.Visit(srv.URL + "/page"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	if requests, errs, refused := spy.get("/page"); requests != 1 || len(errs) != 0 || len(refused) != 0 {
		t.Errorf("OnRequest %d, OnError %v, OnRefused %v; want 1, none, none", requests, errs, refused)
	}
	if n := robots.Load(); n != 3 {
		t.Errorf("robots.txt fetched %d times, want 3 (two 503s, then the file)", n)
	}
}

// TestPrivateNetworkRefusedAtOnce: a page on an address DenyPrivateNetworks
// refuses is refused at once (no robots.txt retries, no request retries),
// to OnRefused with ErrPrivateNetwork and a message that names the address
// and the option, with robots.txt obeyed or not.
func TestPrivateNetworkRefusedAtOnce(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal")
	}))
	defer srv.Close()
	for _, robots := range []bool{true, false} {
		t.Run(fmt.Sprintf("robots=%v", robots), func(t *testing.T) {
			opts := []CollectorOption{DenyPrivateNetworks(), RetryPolicy(RetryOptions{MaxAttempts: 3, BaseDelay: time.Millisecond})}
			if !robots {
				opts = append(opts, IgnoreRobotsTxt())
			}
			c := NewCollector(opts...)
			spy := spyOn(c)
			err := c.Visit(srv.URL + "/page")
			if !errors.Is(err, ErrPrivateNetwork) {
				t.Fatalf("Visit() error = %v, want ErrPrivateNetwork", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, "DenyPrivateNetworks") || strings.HasPrefix(msg, ErrRobotsTxtUnavailable.Error()) {
				t.Errorf("error text %q: want the address and DenyPrivateNetworks named, not a robots.txt failure", msg)
			}
			_, errs, refused := spy.get("/page")
			if len(refused) != 1 || !errors.Is(refused[0], ErrPrivateNetwork) || len(errs) != 0 {
				t.Errorf("OnRefused %v, OnError %v; want one ErrPrivateNetwork refusal, no error", refused, errs)
			}
			st := c.Stats()
			if st.Refused[RefusedPrivateNetwork] != 1 || st.Retries != 0 || st.RobotsFetches > 1 {
				t.Errorf("Stats() refused %v, retries %d, robots fetches %d; want one private_network refusal, no retry, at most one robots.txt fetch",
					st.Refused, st.Retries, st.RobotsFetches)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the refused address was reached %d times", n)
			}
		})
	}
}
