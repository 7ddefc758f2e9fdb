package magpie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// inflightServer blocks every request until release is closed, and closes
// full when n requests are in flight at once.
type inflightServer struct {
	*httptest.Server
	n        int64
	inflight atomic.Int64
	most     atomic.Int64
	full     chan struct{}
	release  chan struct{}
	fullOnce sync.Once
}

func newInflightServer(t *testing.T, n int) *inflightServer {
	t.Helper()
	s := &inflightServer{n: int64(n), full: make(chan struct{}), release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		for {
			old := s.most.Load()
			if cur <= old || s.most.CompareAndSwap(old, cur) {
				break
			}
		}
		if cur >= s.n {
			s.fullOnce.Do(func() { close(s.full) })
		}
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// TestPoolFollowsLimits: a Colly program's LimitRule{DomainGlob: "*",
// Parallelism: 64} with Async and no Workers option gets 64 requests in
// flight at the server, not the 16 of a fixed pool, and no more than the
// rule allows.
func TestPoolFollowsLimits(t *testing.T) {
	s := newInflightServer(t, 64)
	c := NewCollector(Async(), IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 64}); err != nil {
		t.Fatalf("Limit() error = %v", err)
	}
	var errs atomic.Int64
	c.OnError(func(_ *Response, err error) { errs.Add(1) })
	for i := range 100 {
		if err := c.Visit(fmt.Sprintf("%s/p%d", s.URL, i)); err != nil {
			t.Fatalf("Visit(#%d) error = %v", i, err)
		}
	}
	select {
	case <-s.full:
	case <-time.After(20 * time.Second):
		t.Errorf("requests in flight at the server reached %d, want 64", s.most.Load())
	}
	close(s.release)
	c.Wait()
	if got := s.most.Load(); got != 64 {
		t.Errorf("most requests in flight = %d, want 64 (the rule's Parallelism)", got)
	}
	if n := errs.Load(); n != 0 {
		t.Errorf("OnError called %d times, want 0", n)
	}
}

// TestPoolHostCap: a host no rule limits gets DefaultHostParallelism in
// flight when the pool follows the limits, and Workers(n) still fixes the
// pool whatever the rules allow.
func TestPoolHostCap(t *testing.T) {
	tests := []struct {
		name string
		opts []CollectorOption
		rule *LimitRule
		want int
	}{
		{"no rule, no Workers", nil, nil, DefaultHostParallelism},
		{"Workers(8) under Parallelism 64", []CollectorOption{Workers(8)}, &LimitRule{DomainGlob: "*", Parallelism: 64}, 8},
		{"TotalParallelism 5", nil, &LimitRule{DomainGlob: "*", Parallelism: 64, TotalParallelism: 5}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newInflightServer(t, tt.want)
			c := NewCollector(append([]CollectorOption{Async(), IgnoreRobotsTxt()}, tt.opts...)...)
			if tt.rule != nil {
				if err := c.Limit(tt.rule); err != nil {
					t.Fatalf("Limit() error = %v", err)
				}
			}
			for i := range 3 * tt.want {
				if err := c.Visit(fmt.Sprintf("%s/p%d", s.URL, i)); err != nil {
					t.Fatalf("Visit(#%d) error = %v", i, err)
				}
			}
			select {
			case <-s.full:
			case <-time.After(20 * time.Second):
				t.Errorf("requests in flight reached %d, want %d", s.most.Load(), tt.want)
			}
			close(s.release)
			c.Wait()
			if got := s.most.Load(); got != int64(tt.want) {
				t.Errorf("most requests in flight = %d, want %d", got, tt.want)
			}
		})
	}
}

// pipeNet is an in-memory network for a synctest bubble: a real
// http.Server and http.Transport talk over net.Pipe, so writes, dials and
// the server's clock are all in the bubble's virtual time.
type pipeNet struct {
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
	// dialDelay is how long the nth dial (from 1) takes.
	dialDelay func(n int) time.Duration
	dials     atomic.Int64
}

func newPipeNet(dialDelay func(int) time.Duration) *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{}), dialDelay: dialDelay}
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error {
	p.closed.Do(func() { close(p.done) })
	return nil
}

func (p *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (p *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if d := p.dialDelay(int(p.dials.Add(1))); d > 0 {
		select {
		case <-time.After(d): // the handshake, in virtual time
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestDelayAtTheWire: the gap between two request starts to one host, as
// the server sees them, is never below Delay, even when the first request
// spends time between leaving the gate and reaching the wire (here a slow
// first dial, as a TCP or TLS handshake is). The server records arrivals.
func TestDelayAtTheWire(t *testing.T) {
	for _, par := range []int{1, 3} {
		t.Run(fmt.Sprint("Parallelism ", par), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const delay = 300 * time.Millisecond
				pn := newPipeNet(func(n int) time.Duration {
					if n == 1 {
						return 120 * time.Millisecond
					}
					return 40 * time.Millisecond
				})
				var mu sync.Mutex
				var arrivals []time.Time
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					arrivals = append(arrivals, time.Now())
					mu.Unlock()
					<-time.After(200 * time.Millisecond) // server latency
					fmt.Fprint(w, "ok")
				})}
				served := make(chan struct{})
				go func() {
					defer close(served)
					_ = srv.Serve(pn)
				}()
				tr := &http.Transport{DialContext: pn.dial}
				c := NewCollector(Async(), IgnoreRobotsTxt())
				c.WithTransport(tr)
				if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay, Parallelism: par}); err != nil {
					t.Fatalf("Limit() error = %v", err)
				}
				c.OnError(func(r *Response, err error) { t.Errorf("OnError(%s) = %v", r.Request.URL, err) })
				for i := range 8 {
					if err := c.Visit(fmt.Sprintf("http://site.test/p%d", i)); err != nil {
						t.Fatalf("Visit(#%d) error = %v", i, err)
					}
				}
				c.Wait()
				tr.CloseIdleConnections()
				_ = srv.Close()
				<-served
				mu.Lock()
				defer mu.Unlock()
				if len(arrivals) != 8 {
					t.Fatalf("server saw %d requests, want 8", len(arrivals))
				}
				for i := 1; i < len(arrivals); i++ {
					if gap := arrivals[i].Sub(arrivals[i-1]); gap < delay {
						t.Errorf("gap at the server between requests %d and %d = %v, want >= Delay %v", i, i+1, gap, delay)
					}
				}
			})
		})
	}
}

// TestPolitenessPersistsAcrossVisits: Delay, Retry-After holds and back-off
// belong to the collector (and its clones), not to one crawl, so a loop of
// top-level synchronous Visits keeps them.
func TestPolitenessPersistsAcrossVisits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 300 * time.Millisecond
		tr := newScriptTransport(func(hostPath string, n int) (int, http.Header) {
			if hostPath == "held.test/first" {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"5"}}
			}
			return http.StatusOK, nil
		})
		c := NewCollector(IgnoreRobotsTxt())
		c.WithTransport(tr)
		if err := c.Limit(&LimitRule{DomainGlob: "slow.test", Delay: delay}); err != nil {
			t.Fatalf("Limit() error = %v", err)
		}
		for i := range 4 {
			if err := c.Visit(fmt.Sprintf("http://slow.test/p%d", i)); err != nil {
				t.Fatalf("Visit(#%d) error = %v", i, err)
			}
		}
		// A clone shares the collector's politeness.
		if err := c.Clone().Visit("http://slow.test/clone"); err != nil {
			t.Fatalf("clone Visit() error = %v", err)
		}
		var starts []time.Time
		for i := range 4 {
			starts = append(starts, tr.times(fmt.Sprintf("slow.test/p%d", i))...)
		}
		starts = append(starts, tr.times("slow.test/clone")...)
		if len(starts) != 5 {
			t.Fatalf("requests to slow.test = %d, want 5", len(starts))
		}
		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(starts[i-1]); gap < delay {
				t.Errorf("gap between Visit %d and %d = %v, want >= Delay %v", i, i+1, gap, delay)
			}
		}

		var he *HTTPError
		if err := c.Visit("http://held.test/first"); !errors.As(err, &he) || he.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("Visit(held) error = %v, want a 429 HTTPError", err)
		}
		held := time.Now()
		if err := c.Visit("http://held.test/second"); err != nil {
			t.Fatalf("Visit(held second) error = %v", err)
		}
		got := tr.times("held.test/second")
		if len(got) != 1 {
			t.Fatalf("requests to held.test/second = %d, want 1", len(got))
		}
		if wait := got[0].Sub(held); wait < 5*time.Second {
			t.Errorf("next Visit to a host held by Retry-After: 5 started after %v, want >= 5s", wait)
		}
	})
}

// TestRetryAfterCappedAtMaxHold: a Retry-After of centuries with the retry
// policy on holds the request for MaxHold only, and the log says so.
func TestRetryAfterCappedAtMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newScriptTransport(failFirst(1, http.StatusTooManyRequests, http.Header{"Retry-After": {"9999999999999"}}))
		var logs bytes.Buffer
		var logMu sync.Mutex
		c := NewCollector(IgnoreRobotsTxt(), RetryPolicy(RetryOptions{MaxAttempts: 2}),
			Logger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))))
		c.WithTransport(tr)
		if err := c.Visit("http://a.test/x"); err != nil {
			t.Fatalf("Visit() error = %v, want nil (the retry succeeds)", err)
		}
		times := tr.times("a.test/x")
		if len(times) != 2 {
			t.Fatalf("attempts = %d, want 2", len(times))
		}
		hold := c.shared.limiter.MaxHold()
		if wait := times[1].Sub(times[0]); wait > hold+time.Second {
			t.Errorf("retry after a Retry-After of centuries came %v later, want at most MaxHold %v", wait, hold)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(logs.String(), "Retry-After capped at MaxHold") {
			t.Errorf("log = %q, want a warning that Retry-After was capped", logs.String())
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestParseRetryAfterHuge(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"120", 2 * time.Minute},
		{"9999999999999", 1<<63 - 1},
		{"99999999999999999999999", 1<<63 - 1},
		{"-5", 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestStdlibContextCancelStopsRequests: once the StdlibContext is cancelled
// no new request starts; only those already in flight may still arrive, and
// only they reach OnError (with the context's error). Those never sent are
// no failures: counted in Stats.NotStarted when they had been admitted, or
// refused as stopped when Visit came after the cancel; every Visit is one
// of sent, not started, refused.
func TestStdlibContextCancelStopsRequests(t *testing.T) {
	const workers = 4
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var total, afterCancel atomic.Int64
	var cancelled atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cancelled.Load() {
			afterCancel.Add(1)
		}
		if total.Add(1) == 20 {
			cancelled.Store(true)
			cancel()
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	c := NewCollector(Async(), IgnoreRobotsTxt(), Workers(workers), StdlibContext(ctx))
	var ctxErrs atomic.Int64
	c.OnError(func(_ *Response, err error) {
		if errors.Is(err, context.Canceled) {
			ctxErrs.Add(1)
		}
	})
	for i := range 2000 {
		// Once the context is done, admission refuses too.
		if err := c.Visit(fmt.Sprintf("%s/p%d", srv.URL, i)); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Visit(#%d) error = %v, want nil or context.Canceled", i, err)
		}
	}
	c.Wait()
	if n := afterCancel.Load(); n > workers-1 {
		t.Errorf("requests that reached the server after the cancel = %d, want at most %d (those in flight)", n, workers-1)
	}
	if n := ctxErrs.Load(); n > workers {
		t.Errorf("OnError got context.Canceled %d times, want at most %d (those in flight)", n, workers)
	}
	st := c.Stats()
	if sum := uint64(st.Requests) + st.NotStarted + st.Refused[RefusedStopped]; sum != 2000 {
		t.Errorf("sent %d + not started %d + refused as stopped %d = %d, want every one of the 2000 Visits",
			st.Requests, st.NotStarted, st.Refused[RefusedStopped], sum)
	}
}

// TestStdlibContextDeadline: a deadline on the StdlibContext surfaces as
// context.DeadlineExceeded, before a request and during one.
func TestStdlibContextDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the client gives up
	}))
	defer srv.Close()
	past, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	soon, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	for name, ctx := range map[string]context.Context{"expired": past, "expires in flight": soon} {
		t.Run(name, func(t *testing.T) {
			c := NewCollector(IgnoreRobotsTxt(), StdlibContext(ctx))
			err := c.Visit(srv.URL + "/x")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Visit() error = %v, want errors.Is context.DeadlineExceeded", err)
			}
			if errors.Is(err, context.Canceled) {
				t.Errorf("Visit() error = %v, want not context.Canceled", err)
			}
		})
	}
}

// TestCallbackGoexit: runtime.Goexit in a callback (t.FailNow calls it) is
// reported like a panic and the crawl finishes, even when more callbacks
// exit than there are workers.
func TestCallbackGoexit(t *testing.T) {
	for _, where := range []string{"OnRequest", "OnResponse", "OnHTML", "OnError"} {
		t.Run(where, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/404") {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, "<html><body><p>page</p></body></html>")
			}))
			defer ts.Close()
			c := NewCollector(Async(), IgnoreRobotsTxt(), Workers(2))
			switch where {
			case "OnRequest":
				c.OnRequest(func(r *Request) {
					if strings.HasPrefix(r.URL.Path, "/exit") {
						runtime.Goexit()
					}
				})
			case "OnResponse":
				c.OnResponse(func(r *Response) {
					if strings.HasPrefix(r.Request.URL.Path, "/exit") {
						runtime.Goexit()
					}
				})
			case "OnHTML":
				c.OnHTML("html", func(e *HTMLElement) {
					if strings.HasPrefix(e.Request.URL.Path, "/exit") {
						runtime.Goexit()
					}
				})
			}
			var mu sync.Mutex
			var goexits, others int
			c.OnError(func(r *Response, err error) {
				if where == "OnError" && !errors.Is(err, ErrCallbackGoexit) && strings.HasPrefix(r.Request.URL.Path, "/exit") {
					runtime.Goexit()
				}
				mu.Lock()
				defer mu.Unlock()
				if errors.Is(err, ErrCallbackGoexit) && errors.Is(err, ErrCallbackPanic) {
					goexits++
				} else if where != "OnError" {
					others++
				}
			})
			var ok atomic.Int64
			c.OnScraped(func(*Response) { ok.Add(1) })
			for i := range 6 {
				path := fmt.Sprintf("/exit%d", i)
				if where == "OnError" {
					path = fmt.Sprintf("/exit%d/404", i) // fails, so OnError runs
				}
				if err := c.Visit(ts.URL + path); err != nil {
					t.Fatalf("Visit(%s) error = %v", path, err)
				}
			}
			if err := c.Visit(ts.URL + "/html"); err != nil {
				t.Fatalf("Visit(/html) error = %v", err)
			}
			waited := make(chan struct{})
			go func() {
				defer close(waited)
				c.Wait()
			}()
			select {
			case <-waited:
			case <-time.After(20 * time.Second):
				t.Fatal("Wait did not return after callbacks called runtime.Goexit")
			}
			mu.Lock()
			defer mu.Unlock()
			if goexits != 6 {
				t.Errorf("OnError got %d ErrCallbackGoexit errors, want 6 (one per request)", goexits)
			}
			if others != 0 {
				t.Errorf("OnError got %d other errors, want 0", others)
			}
			if n := ok.Load(); n < 1 {
				t.Errorf("OnScraped ran %d times, want the /html page scraped", n)
			}
		})
	}
}

// TestQueueRefusalGoexit: an OnRefused that calls runtime.Goexit for an
// entry refused when leased (it runs on the run's feeder) does not stall the
// queue run: the other entries are crawled and RunQueue returns.
func TestQueueRefusalGoexit(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(IgnoreRobotsTxt(), DisallowedURLFilters(regexp.MustCompile(`/b$`)))
	var exits atomic.Int64
	c.OnRefused(func(_ *Request, err error) {
		if errors.Is(err, ErrForbiddenURL) {
			exits.Add(1)
			runtime.Goexit()
		}
	})
	q := storage.NewMemoryQueue(0)
	for _, p := range []string{"/b", "/a", "/b", "/c", "/b"} {
		pushURL(t, q, ts.URL+p)
	}
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(t.Context(), q, 2) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunQueue() error = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RunQueue did not return after OnRefused called runtime.Goexit")
	}
	if n := exits.Load(); n < 1 {
		t.Errorf("OnRefused for refused entries ran %d times, want >= 1", n)
	}
	for _, p := range []string{"/a", "/c"} {
		if got := ts.count(p); got != 1 {
			t.Errorf("fetches of %s = %d, want 1", p, got)
		}
	}
}

// TestDelayAtTheWireRealServer: on a real loopback server, a host with
// Parallelism 1 gets request starts at least Delay apart as the server's
// own clock sees them, for every pair: its start is counted from the first
// response byte, which the server sends only after it has seen the request.
func TestDelayAtTheWireRealServer(t *testing.T) {
	const delay = 50 * time.Millisecond
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	c := NewCollector(Async(), IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay}); err != nil {
		t.Fatalf("Limit() error = %v", err)
	}
	for i := range 6 {
		if err := c.Visit(fmt.Sprintf("%s/p%d", srv.URL, i)); err != nil {
			t.Fatalf("Visit(#%d) error = %v", i, err)
		}
	}
	c.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 6 {
		t.Fatalf("server saw %d requests, want 6", len(arrivals))
	}
	for i := 1; i < len(arrivals); i++ {
		if gap := arrivals[i].Sub(arrivals[i-1]); gap < delay {
			t.Errorf("gap at the server between requests %d and %d = %v, want >= Delay %v", i, i+1, gap, delay)
		}
	}
}
