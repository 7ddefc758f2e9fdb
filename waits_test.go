package magpie

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// waitSite answers / with links to /busy and /p1, /p2; /busy answers 429
// with the Retry-After given (busyTimes times, then 200; -1: always), and
// /robots.txt answers robotsStatus. It is an http.RoundTripper, so that
// synctest's clock runs it.
type waitSite struct {
	retryAfter   string
	busyTimes    int
	robotsStatus int
	mu           sync.Mutex
	tries        map[string]int
}

func (s *waitSite) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if s.tries == nil {
		s.tries = map[string]int{}
	}
	s.tries[r.URL.Path]++
	n := s.tries[r.URL.Path]
	s.mu.Unlock()
	status, h, body := http.StatusOK, http.Header{"Content-Type": {"text/html"}}, "page"
	switch {
	case r.URL.Path == "/robots.txt":
		status, body = s.robotsStatus, ""
	case r.URL.Path == "/":
		body = `<a href="/busy">busy</a><a href="/p1">1</a><a href="/p2">2</a>`
	case r.URL.Path == "/busy" && (s.busyTimes < 0 || n <= s.busyTimes):
		status = http.StatusTooManyRequests
		h.Set("Retry-After", s.retryAfter)
	}
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}, nil
}

func (s *waitSite) triesOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[path]
}

// Issue 40 point 10: a request waiting out a long Retry-After is listed in
// Stats().Waits (why, until when, which URL) while it waits, and no longer
// once it has gone again.
func TestStatsWaitsRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		site := &waitSite{retryAfter: "120", busyTimes: 1, robotsStatus: http.StatusNotFound}
		c := NewCollector(Async())
		c.WithTransport(site)
		c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		if err := c.Visit("http://wait.test/"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
		synctest.Wait() // everything left waits on a clock
		start := time.Now()
		st := c.Stats()
		if st.Waiting != 1 || len(st.Waits) != 1 {
			t.Fatalf("Stats() Waiting %d, Waits %+v; want the one request waiting out its Retry-After", st.Waiting, st.Waits)
		}
		w := st.Waits[0]
		if w.URL != "http://wait.test/busy" || w.Method != http.MethodGet || w.Reason != WaitRetryAfter ||
			w.Status != http.StatusTooManyRequests || w.Attempt != 1 || time.Until(w.Until) != 120*time.Second {
			t.Errorf("Waits[0] = %+v (%v left), want GET http://wait.test/busy, Retry-After, 429, attempt 1, 120s left", w, time.Until(w.Until))
		}
		if s := st.String(); !strings.Contains(s, "waiting 1") || !strings.Contains(s, "Retry-After until") || !strings.Contains(s, "GET http://wait.test/busy") {
			t.Errorf("Stats().String() does not name the wait:\n%s", s)
		}
		time.Sleep(100 * time.Second)
		if st := c.Stats(); st.Waiting != 1 || time.Until(st.Waits[0].Until) != 20*time.Second {
			t.Errorf("100 s in: Waiting %d, Waits %+v; want 20 s left", st.Waiting, st.Waits)
		}
		c.Wait()
		if d := time.Since(start); d < 20*time.Second {
			t.Errorf("the crawl ended %v after, want the Retry-After waited out", d)
		}
		if n := site.triesOf("/busy"); n != 2 {
			t.Errorf("/busy tried %d times, want 2", n)
		}
		if st := c.Stats(); st.Waiting != 0 || st.Waits != nil {
			t.Errorf("after the crawl: Waiting %d, Waits %+v; want none", st.Waiting, st.Waits)
		}
	})
}

// The wait ends when the request leaves the frontier, before its Until
// when it goes on without its host's hold (a queue run re-leases it too).
func TestWaitListLeft(t *testing.T) {
	var l waitList
	req := &Request{URL: mustURL(t, "http://h/a"), Method: http.MethodGet}
	now := time.Now()
	l.begin(req, WaitBackoff, 503, now.Add(time.Hour))
	if n, ws := l.snapshot(now, 10); n != 1 || len(ws) != 1 || ws[0].Reason != WaitBackoff || ws[0].Status != 503 {
		t.Fatalf("snapshot() = %d, %+v; want the backoff wait", n, ws)
	}
	l.left(&Request{URL: mustURL(t, "http://h/a"), Method: http.MethodGet})
	if n, ws := l.snapshot(now, 10); n != 0 || len(ws) != 0 {
		t.Errorf("snapshot() after left = %d, %+v; want none", n, ws)
	}
	// Past its Until, an entry no one saw leave is dropped.
	l.begin(req, WaitRetryAfter, 429, now.Add(time.Second))
	if n, _ := l.snapshot(now.Add(2*time.Second), 10); n != 0 {
		t.Errorf("snapshot() past Until = %d waiting, want 0", n)
	}
	// The longest first, at most max.
	for i := range 5 {
		r := &Request{URL: mustURL(t, fmt.Sprintf("http://h/%d", i)), Method: http.MethodGet}
		l.begin(r, WaitRetryAfter, 429, now.Add(time.Duration(i+1)*time.Minute))
	}
	n, ws := l.snapshot(now, 3)
	if n != 5 || len(ws) != 3 || ws[0].URL != "http://h/4" || ws[2].URL != "http://h/2" {
		t.Errorf("snapshot(max 3) = %d, %+v; want 5 waiting, /4 /3 /2 listed", n, ws)
	}
}

// A request waiting for its host's unreachable robots.txt is listed with
// reason robots.txt.
func TestStatsWaitsRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		site := &waitSite{robotsStatus: http.StatusServiceUnavailable}
		c := NewCollector(Async())
		c.WithTransport(site)
		if err := c.Visit("http://wait.test/p1"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
		synctest.Wait()
		st := c.Stats()
		if st.Waiting != 1 || len(st.Waits) != 1 || st.Waits[0].Reason != WaitRobots || st.Waits[0].URL != "http://wait.test/p1" {
			t.Errorf("Stats() Waiting %d, Waits %+v; want /p1 waiting for robots.txt", st.Waiting, st.Waits)
		}
		c.Wait()
	})
}

// Issue 40 point 10: MaxRetryAfter(d) fails at once a request whose
// Retry-After is longer than d (ErrRetryAfterTooLong, wrapping the 429),
// holds its host for d only, and still waits out a Retry-After up to d. A
// request with no retry left fails with its 429 alone: it was not kept
// from waiting.
func TestMaxRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		opts       []CollectorOption
		retryAfter string
		fails      bool
		tries      int
		tooLong    bool // the error wraps ErrRetryAfterTooLong
	}{
		{"over the bound", nil, "120", true, 1, true},
		{"over the bound, RetryPolicy", []CollectorOption{RetryPolicy(RetryOptions{MaxAttempts: 3})}, "120", true, 1, true},
		{"over the bound, no retries", []CollectorOption{BusyRetries(0)}, "120", true, 1, false},
		{"within the bound", nil, "5", false, 2, false},
		{"MaxRetryAfter(0): no bound", []CollectorOption{MaxRetryAfter(0)}, "120", false, 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				site := &waitSite{retryAfter: tt.retryAfter, busyTimes: 1, robotsStatus: http.StatusNotFound}
				c := NewCollector(append([]CollectorOption{MaxRetryAfter(10 * time.Second)}, tt.opts...)...)
				c.WithTransport(site)
				// One request at a time, /busy first: /p1 and /p2 start
				// after the host's hold.
				if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1}); err != nil {
					t.Fatal(err)
				}
				c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
				var errs []error
				c.OnError(func(_ *Response, err error) { errs = append(errs, err) })
				start := time.Now()
				if err := c.Visit("http://wait.test/"); err != nil {
					t.Fatalf("Visit() error = %v", err)
				}
				took := time.Since(start)
				if n := site.triesOf("/busy"); n != tt.tries {
					t.Errorf("/busy tried %d times, want %d", n, tt.tries)
				}
				if site.triesOf("/p1") != 1 || site.triesOf("/p2") != 1 {
					t.Errorf("/p1, /p2 tried %d, %d times; want once each", site.triesOf("/p1"), site.triesOf("/p2"))
				}
				if !tt.fails {
					if len(errs) != 0 {
						t.Errorf("OnError got %v, want nothing: a Retry-After within the bound is waited for", errs)
					}
					if ra, _ := strconv.Atoi(tt.retryAfter); took < time.Duration(ra)*time.Second {
						t.Errorf("crawl took %v, want the Retry-After (%s s) waited out", took, tt.retryAfter)
					}
					return
				}
				if len(errs) != 1 {
					t.Fatalf("OnError called %d times (%v), want once", len(errs), errs)
				}
				he, ok := errors.AsType[*HTTPError](errs[0])
				if errors.Is(errs[0], ErrRetryAfterTooLong) != tt.tooLong || !ok || he.StatusCode != http.StatusTooManyRequests {
					t.Errorf("OnError error = %v, want the 429 (wrapped by ErrRetryAfterTooLong: %v)", errs[0], tt.tooLong)
				}
				if tt.tooLong && !strings.Contains(errs[0].Error(), "2m0s") {
					t.Errorf("error %q does not say how long the server asked to wait", errs[0])
				}
				// The host was held for the bound, not for the Retry-After.
				if took < 10*time.Second || took >= 30*time.Second {
					t.Errorf("crawl took %v, want the host held 10 s (the bound), not 120 s", took)
				}
			})
		})
	}
}

// A RetryPolicy's pause after a failure without Retry-After is listed as
// WaitBackoff.
func TestStatsWaitsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		site := &waitSite{retryAfter: "", busyTimes: 1, robotsStatus: http.StatusNotFound}
		c := NewCollector(Async(), RetryPolicy(RetryOptions{BaseDelay: 10 * time.Second, MaxDelay: 10 * time.Second}))
		c.WithTransport(site)
		if err := c.Visit("http://wait.test/busy"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
		synctest.Wait()
		st := c.Stats()
		if st.Waiting != 1 || st.Waits[0].Reason != WaitBackoff || st.Waits[0].Status != http.StatusTooManyRequests {
			t.Errorf("Stats() Waiting %d, Waits %+v; want /busy in a backoff after its 429", st.Waiting, st.Waits)
		}
		if left := time.Until(st.Waits[0].Until); left < 5*time.Second || left > 10*time.Second {
			t.Errorf("backoff wait %v, want 5-10 s (BaseDelay 10 s, half of it jitter)", left)
		}
		c.Wait()
	})
}

// ProgressInterval's line names the longest wait while requests wait.
func TestProgressIntervalNamesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &progressHandler{first: make(chan struct{})}
		site := &waitSite{retryAfter: "120", busyTimes: 1, robotsStatus: http.StatusNotFound}
		c := NewCollector(Async(), Logger(slog.New(h)), ProgressInterval(30*time.Second))
		c.WithTransport(site)
		if err := c.Visit("http://wait.test/busy"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
		c.Wait()
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.lines) == 0 {
			t.Fatal("no progress line")
		}
		got := map[string]string{}
		h.lines[0].Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		want := map[string]string{"waiting": "1", "reason": WaitRetryAfter, "url": "http://wait.test/busy", "duration": "1m30s"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("progress line 30 s in: %s = %q, want %q (all: %v)", k, got[k], v, got)
			}
		}
	})
}
