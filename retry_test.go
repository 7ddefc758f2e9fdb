package magpie

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

func TestRetryBackoff(t *testing.T) {
	p := RetryOptions{BaseDelay: time.Second, MaxDelay: 10 * time.Second}.withDefaults()
	lowest := func(int64) int64 { return 0 }
	highest := func(n int64) int64 { return n - 1 }
	tests := []struct {
		attempt  int
		min, max time.Duration // with the lowest and the highest random draw
	}{
		{attempt: 1, min: 500 * time.Millisecond, max: time.Second},
		{attempt: 2, min: time.Second, max: 2 * time.Second},
		{attempt: 3, min: 2 * time.Second, max: 4 * time.Second},
		{attempt: 4, min: 4 * time.Second, max: 8 * time.Second},
		{attempt: 5, min: 5 * time.Second, max: 10 * time.Second}, // capped
		{attempt: 60, min: 5 * time.Second, max: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("attempt ", tt.attempt), func(t *testing.T) {
			if got := p.backoff(tt.attempt, lowest); got != tt.min {
				t.Errorf("backoff(%d, lowest) = %v, want %v", tt.attempt, got, tt.min)
			}
			if got := p.backoff(tt.attempt, highest); got != tt.max {
				t.Errorf("backoff(%d, highest) = %v, want %v", tt.attempt, got, tt.max)
			}
		})
	}
	t.Run("random draw bound", func(t *testing.T) {
		var bound int64
		p.backoff(2, func(n int64) int64 { bound = n; return 0 })
		if want := int64(time.Second) + 1; bound != want {
			t.Errorf("backoff(2) asked random(%d), want random(%d) so that the full delay is reachable", bound, want)
		}
	})
	t.Run("tiny base", func(t *testing.T) {
		q := RetryOptions{BaseDelay: 1, MaxDelay: 1}.withDefaults()
		if got := q.backoff(3, lowest); got != 1 {
			t.Errorf("backoff(3) with 1 ns base = %v, want 1ns", got)
		}
	})
}

// scriptTransport is an http.RoundTripper that answers from a script and
// records when each request arrived. It opens no socket, so a synctest
// bubble's clock only moves when every goroutine waits.
type scriptTransport struct {
	// script gives the status and headers of the nth (from 1) request to host+path.
	script func(hostPath string, n int) (int, http.Header)

	mu   sync.Mutex // guards hits
	hits map[string][]time.Time
}

func newScriptTransport(script func(hostPath string, n int) (int, http.Header)) *scriptTransport {
	return &scriptTransport{script: script, hits: map[string][]time.Time{}}
}

func (s *scriptTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	key := r.URL.Host + r.URL.Path
	s.mu.Lock()
	s.hits[key] = append(s.hits[key], time.Now())
	n := len(s.hits[key])
	s.mu.Unlock()
	status, h := s.script(key, n)
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "text/plain")
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader("body")), ContentLength: 4, Request: r,
	}, nil
}

func (s *scriptTransport) times(key string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.hits[key]...)
}

// failFirst fails the first n requests to each URL with status, then succeeds.
func failFirst(n, status int, h http.Header) func(string, int) (int, http.Header) {
	return func(_ string, i int) (int, http.Header) {
		if i <= n {
			return status, h.Clone()
		}
		return http.StatusOK, nil
	}
}

// checkGaps checks that try k+1 came after try k by at least half and at
// most all of the policy's delay for attempt k (equal jitter).
func checkGaps(t *testing.T, p RetryOptions, times []time.Time) {
	t.Helper()
	p = p.withDefaults()
	for k := 1; k < len(times); k++ {
		full := p.backoff(k, func(n int64) int64 { return n - 1 })
		gap := times[k].Sub(times[k-1])
		if gap < full/2 || gap > full {
			t.Errorf("gap before attempt %d = %v, want between %v and %v", k+1, gap, full/2, full)
		}
	}
}

func TestRetryPolicySynctest(t *testing.T) {
	policy := RetryOptions{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: time.Minute}
	t.Run("3 failures then success", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := newScriptTransport(failFirst(3, http.StatusInternalServerError, nil))
			c := NewCollector(IgnoreRobotsTxt(), RetryPolicy(policy))
			c.WithTransport(tr)
			var errs []error
			c.OnError(func(_ *Response, err error) { errs = append(errs, err) })
			if err := c.Visit("http://a.test/x"); err != nil {
				t.Errorf("Visit() error = %v, want nil", err)
			}
			times := tr.times("a.test/x")
			if len(times) != 4 {
				t.Fatalf("attempts = %d, want 4", len(times))
			}
			checkGaps(t, policy, times)
			if len(errs) != 0 {
				t.Errorf("OnError got %v, want nothing (the last attempt succeeded)", errs)
			}
		})
	})
	t.Run("Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := newScriptTransport(failFirst(1, http.StatusServiceUnavailable, http.Header{"Retry-After": {"2"}}))
			c := NewCollector(IgnoreRobotsTxt(), RetryPolicy(RetryOptions{BaseDelay: 10 * time.Millisecond}))
			c.WithTransport(tr)
			if err := c.Visit("http://a.test/x"); err != nil {
				t.Errorf("Visit() error = %v, want nil", err)
			}
			times := tr.times("a.test/x")
			if len(times) != 2 {
				t.Fatalf("attempts = %d, want 2", len(times))
			}
			if gap := times[1].Sub(times[0]); gap < 2*time.Second {
				t.Errorf("gap after Retry-After: 2 = %v, want >= 2s", gap)
			}
		})
	})
	t.Run("final failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := newScriptTransport(failFirst(100, http.StatusBadGateway, nil))
			c := NewCollector(IgnoreRobotsTxt(), RetryPolicy(policy))
			c.WithTransport(tr)
			var got error
			c.OnError(func(_ *Response, err error) { got = err })
			err := c.Visit("http://a.test/x")
			var re *RetryError
			if !errors.As(err, &re) || re.Attempts != 4 {
				t.Errorf("Visit() error = %v, want *RetryError{Attempts: 4}", err)
			}
			var he *HTTPError
			if !errors.As(got, &re) || re.Attempts != 4 || !errors.As(got, &he) || he.StatusCode != http.StatusBadGateway {
				t.Errorf("OnError error = %v, want *RetryError{Attempts: 4} wrapping a 502 *HTTPError", got)
			}
			if n := len(tr.times("a.test/x")); n != 4 {
				t.Errorf("attempts = %d, want 4", n)
			}
		})
	})
	t.Run("other hosts go ahead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := newScriptTransport(func(key string, n int) (int, http.Header) {
				if key == "a.test/x" && n == 1 {
					return http.StatusServiceUnavailable, http.Header{"Retry-After": {"10"}}
				}
				return http.StatusOK, nil
			})
			// One worker: a retry that held it while waiting would hold up b and c.
			c := NewCollector(IgnoreRobotsTxt(), Async(), Workers(1), RetryPolicy(policy))
			c.WithTransport(tr)
			start := time.Now()
			for _, u := range []string{"http://a.test/x", "http://b.test/y", "http://c.test/z"} {
				if err := c.Visit(u); err != nil {
					t.Fatalf("Visit(%q) error = %v, want nil", u, err)
				}
			}
			c.Wait()
			for _, k := range []string{"b.test/y", "c.test/z"} {
				times := tr.times(k)
				if len(times) != 1 || times[0].Sub(start) >= time.Second {
					t.Errorf("%s fetched at %v after start, want once, at once", k, times)
				}
			}
			if times := tr.times("a.test/x"); len(times) != 2 || times[1].Sub(start) < 10*time.Second {
				t.Errorf("a.test/x fetched at %v, want twice, the second after 10s", times)
			}
		})
	})
}

// TestRunQueueRetrySynctest checks that a queue run's retry waits in the
// storage (released with a not-before time, holding no lease or worker), and
// that its deliveries count as attempts.
func TestRunQueueRetrySynctest(t *testing.T) {
	policy := RetryOptions{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Minute}
	tests := []struct {
		name         string
		failures     int
		wantAttempts int
		wantErr      bool
	}{
		{name: "2 failures then success", failures: 2, wantAttempts: 3},
		{name: "final failure", failures: 100, wantAttempts: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := newScriptTransport(failFirst(tt.failures, http.StatusInternalServerError, nil))
				c := NewCollector(IgnoreRobotsTxt(), RetryPolicy(policy))
				c.WithTransport(tr)
				var got error
				c.OnError(func(_ *Response, err error) { got = err })
				q := storage.NewMemoryQueue(0)
				defer q.Close()
				pushURL(t, q, "http://a.test/x")
				done := make(chan error, 1)
				go func() { done <- c.RunQueue(t.Context(), q, 2) }()
				synctest.Wait() // the first attempt failed; the retry waits
				if l, err := q.Len(t.Context()); err != nil || l != (storage.QueueLen{Delayed: 1}) {
					t.Errorf("queue while the retry waits = %+v, %v; want 1 delayed entry, none leased", l, err)
				}
				if err := <-done; err != nil {
					t.Errorf("RunQueue() error = %v, want nil", err)
				}
				times := tr.times("a.test/x")
				if len(times) != tt.wantAttempts {
					t.Fatalf("attempts = %d, want %d", len(times), tt.wantAttempts)
				}
				checkGaps(t, policy, times)
				var re *RetryError
				switch {
				case tt.wantErr && (!errors.As(got, &re) || re.Attempts != tt.wantAttempts):
					t.Errorf("OnError error = %v, want *RetryError{Attempts: %d}", got, tt.wantAttempts)
				case !tt.wantErr && got != nil:
					t.Errorf("OnError error = %v, want none", got)
				}
				if l, _ := q.Len(t.Context()); l.Total() != 0 {
					t.Errorf("queue after RunQueue = %+v, want empty", l)
				}
			})
		})
	}
}
