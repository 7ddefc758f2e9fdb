package magpie

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// busySite is a site of pages /p0 … /p(n-1), each linking to the next two,
// behind a rate limiter that answers the first request for every third page
// (/p0, /p3, …) 429 (with Retry-After: 1 when retryAfter is set), and
// /forever, which is always 429. Which requests are refused does not depend
// on the order the crawler's workers happen to send them in, so no page can
// be refused more often than its retries allow. It is an http.RoundTripper,
// so that synctest's clock can run it.
type busySite struct {
	n          int
	retryAfter bool
	mu         sync.Mutex
	tries      map[string]int // requests by path
	ok         map[string]int // 200 answers by path
}

func newBusySite(n int, retryAfter bool) *busySite {
	return &busySite{n: n, retryAfter: retryAfter, tries: map[string]int{}, ok: map[string]int{}}
}

// busyPages is how many pages of an n-page busySite answer 429 once.
func busyPages(n int) int { return (n + 2) / 3 }

func (s *busySite) answer(path string) (int, http.Header, string) {
	h := http.Header{"Content-Type": {"text/html"}}
	i, err := strconv.Atoi(strings.TrimPrefix(path, "/p"))
	s.mu.Lock()
	s.tries[path]++
	first := s.tries[path] == 1
	s.mu.Unlock()
	if path == "/forever" || first && err == nil && i%3 == 0 {
		if s.retryAfter {
			h.Set("Retry-After", "1")
		}
		return http.StatusTooManyRequests, h, "slow down"
	}
	s.mu.Lock()
	s.ok[path]++
	s.mu.Unlock()
	var b strings.Builder
	for _, j := range []int{2*i + 1, 2*i + 2} {
		if j < s.n {
			fmt.Fprintf(&b, `<a href="/p%d">p%d</a>`, j, j)
		}
	}
	return http.StatusOK, h, b.String()
}

func (s *busySite) RoundTrip(r *http.Request) (*http.Response, error) {
	status, h, body := s.answer(r.URL.Path)
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}, nil
}

func (s *busySite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, h, body := s.answer(r.URL.Path)
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// checkAll checks that every page was answered 200 exactly once.
func (s *busySite) checkAll(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.n {
		if p := fmt.Sprintf("/p%d", i); s.ok[p] != 1 {
			t.Errorf("%s crawled %d times, want 1", p, s.ok[p])
		}
	}
}

// TestBusyRetriedByDefault: a site that answers 429 to a third of its pages
// is crawled whole without a RetryPolicy, in sync, async and queue runs;
// the retries are counted in Stats().BusyRetries, and nothing reaches
// OnError.
func TestBusyRetriedByDefault(t *testing.T) {
	const pages = 40
	modes := []struct {
		name string
		run  func(t *testing.T, c *Collector)
	}{
		{"sync", func(t *testing.T, c *Collector) {
			if err := c.Visit("http://busy.test/p0"); err != nil {
				t.Errorf("Visit() error = %v", err)
			}
		}},
		{"async", func(t *testing.T, c *Collector) {
			c.Async = true
			if err := c.Visit("http://busy.test/p0"); err != nil {
				t.Errorf("Visit() error = %v", err)
			}
			c.Wait()
		}},
		{"queue", func(t *testing.T, c *Collector) {
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			pushURL(t, q, "http://busy.test/p0")
			if err := c.RunQueue(t.Context(), q, 4); err != nil {
				t.Errorf("RunQueue() error = %v", err)
			}
		}},
	}
	for _, m := range modes {
		for _, retryAfter := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/Retry-After=%v", m.name, retryAfter), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					site := newBusySite(pages, retryAfter)
					c := NewCollector(IgnoreRobotsTxt())
					c.WithTransport(site)
					c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
					var errs []error
					var mu sync.Mutex
					c.OnError(func(_ *Response, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
					m.run(t, c)
					site.checkAll(t)
					if len(errs) != 0 {
						t.Errorf("OnError got %d errors (%v), want none", len(errs), errs[0])
					}
					st := c.Stats()
					if want := uint64(busyPages(pages)); st.BusyRetries != want || st.StatusCodes[429] != want || st.Retries != 0 {
						t.Errorf("Stats: BusyRetries %d, 429s %d, Retries %d; want %d busy retries, one per 429, and no policy retries",
							st.BusyRetries, st.StatusCodes[429], st.Retries, want)
					}
				})
			})
		}
	}
}

// TestBusyForeverGivesUp: a page that always answers 429 is tried
// 1+DefaultBusyRetries times (BusyRetries(n) sets the bound, 0 turns it
// off), each after the host's hold, and then reaches OnError once as a
// *RetryError wrapping the 429.
func TestBusyForeverGivesUp(t *testing.T) {
	tests := []struct {
		name string
		opts []CollectorOption
		want int // tries
	}{
		{"default", nil, 1 + DefaultBusyRetries},
		{"BusyRetries(2)", []CollectorOption{BusyRetries(2)}, 3},
		{"BusyRetries(0)", []CollectorOption{BusyRetries(0)}, 1},
		// A RetryPolicy that lists 429 decides alone.
		{"RetryPolicy", []CollectorOption{RetryPolicy(RetryOptions{MaxAttempts: 2})}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				site := newBusySite(0, true)
				c := NewCollector(append([]CollectorOption{IgnoreRobotsTxt()}, tt.opts...)...)
				c.WithTransport(site)
				var errs []error
				c.OnError(func(_ *Response, err error) { errs = append(errs, err) })
				start := time.Now()
				err := c.Visit("http://busy.test/forever")
				site.mu.Lock()
				n := site.tries["/forever"]
				site.mu.Unlock()
				if n != tt.want {
					t.Errorf("tries = %d, want %d", n, tt.want)
				}
				if len(errs) != 1 {
					t.Fatalf("OnError called %d times, want once", len(errs))
				}
				he, ok := errors.AsType[*HTTPError](errs[0])
				if !ok || he.StatusCode != http.StatusTooManyRequests {
					t.Errorf("OnError error = %v, want a 429 *HTTPError", errs[0])
				}
				if re, ok := errors.AsType[*RetryError](errs[0]); tt.want > 1 && (!ok || re.Attempts != tt.want) {
					t.Errorf("OnError error = %v, want *RetryError{Attempts: %d}", errs[0], tt.want)
				}
				if he, ok := errors.AsType[*HTTPError](err); !ok || he.StatusCode != http.StatusTooManyRequests {
					t.Errorf("Visit() error = %v, want the 429", err)
				}
				// Each retry waited at least the Retry-After: 1.
				if d := time.Since(start); d < time.Duration(tt.want-1)*time.Second {
					t.Errorf("%d tries took %v, want at least %v (Retry-After: 1 each)", tt.want, d, time.Duration(tt.want-1)*time.Second)
				}
			})
		})
	}
}

// TestBusyRetriedRealServer crawls a local server that answers a third of
// its pages 429 once, over real connections.
func TestBusyRetriedRealServer(t *testing.T) {
	site := newBusySite(8, false)
	srv := httptest.NewServer(site)
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var failed atomic.Int64
	c.OnError(func(*Response, error) { failed.Add(1) })
	if err := c.Visit(srv.URL + "/p0"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	site.checkAll(t)
	if n := failed.Load(); n != 0 {
		t.Errorf("OnError called %d times, want 0", n)
	}
	if got, want := c.Stats().BusyRetries, uint64(busyPages(8)); got != want {
		t.Errorf("Stats().BusyRetries = %d, want %d: each 429 counted", got, want)
	}
}
