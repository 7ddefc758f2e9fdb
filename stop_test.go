package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// TestStopFromCallback checks that Stop called from a callback of the crawl
// it stops does not wait for that callback (a deadlock), and that Visit and
// Wait then return.
func TestStopFromCallback(t *testing.T) {
	ts := newTestServer(t)
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			c := NewCollector(Async(async), IgnoreRobotsTxt())
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			c.OnResponse(func(r *Response) {
				if r.Request.URL.Path == "/a" {
					c.Stop()
				}
			})
			done := make(chan struct{})
			go func() { _ = c.Visit(ts.URL + "/"); c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Visit and Wait did not return after Stop from a callback")
			}
			c.runMu.Lock()
			defer c.runMu.Unlock()
			if c.run != nil || len(c.stopping) != 0 {
				t.Errorf("after Wait: run = %v, stopping = %d; want none", c.run, len(c.stopping))
			}
		})
	}
}

// stopSite is a site of pages queued behind a long Delay: "/" links to
// every page, and each page's request hangs until the client gives up, so
// a request in flight when the crawl's context ends is cut short, never
// answered. onFirst runs at the first page's request.
type stopSite struct {
	*httptest.Server
	pages   int
	hits    atomic.Int64 // requests for pages ("/" not counted)
	onFirst func()
}

func newStopSite(t *testing.T, pages int, onFirst func()) *stopSite {
	s := &stopSite{pages: pages, onFirst: onFirst}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html")
			for i := range s.pages {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
			return
		}
		if s.hits.Add(1) == 1 && s.onFirst != nil {
			s.onFirst()
		}
		<-r.Context().Done()
	}))
	t.Cleanup(s.Close)
	return s
}

// stopSpy records what a stopping crawl tells its callbacks.
type stopSpy struct {
	mu      sync.Mutex
	errors  []error
	refused int64 // OnRefused calls with ErrStopped
	other   []error
}

func (s *stopSpy) watch(c *Collector) {
	c.OnError(func(_ *Response, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.errors = append(s.errors, err)
	})
	c.OnRefused(func(_ *Request, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if errors.Is(err, ErrStopped) {
			s.refused++
		} else {
			s.other = append(s.other, err)
		}
	})
}

// crawlContext is the crawl's context of a stop case: cancelled at the
// first page's request, or with a deadline 300 ms away (sooner than the
// site's Delay lets a second request start). ended receives when it is
// done, to time the crawl's end from there.
func crawlContext(t *testing.T, deadline bool) (ctx context.Context, onFirst func(), ended <-chan time.Time) {
	var cancel context.CancelFunc
	if deadline {
		ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	} else {
		ctx, cancel = context.WithCancel(t.Context())
	}
	t.Cleanup(cancel)
	at := make(chan time.Time, 1)
	go func() {
		<-ctx.Done()
		at <- time.Now()
	}()
	return ctx, func() { cancel() }, at
}

// TestStdlibContextStopsQueuedRequests: 1,000 pages wait behind a host's
// 1 s Delay when the collector's StdlibContext is cancelled or reaches its
// deadline. The crawl ends within 2 s, as Stop would end it, however many
// Delays the queued pages would take: the page in flight fails once with
// the context's error, never retried (RetryPolicy and BusyRetries are on);
// the pages never sent reach no OnError and are counted in
// Stats.NotStarted. A queue run keeps all of them in its queue.
func TestStdlibContextStopsQueuedRequests(t *testing.T) {
	const pages = 1000
	for _, mode := range []string{"async", "sync", "queue"} {
		for _, deadline := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deadline=%v", mode, deadline), func(t *testing.T) {
				ctx, cancel, ended := crawlContext(t, deadline)
				// The cancel waits until every page is queued.
				queued := make(chan struct{})
				first := func() { <-queued; cancel() }
				if deadline {
					first = nil
				}
				site := newStopSite(t, pages, first)
				c := NewCollector(StdlibContext(ctx), IgnoreRobotsTxt(), Async(mode != "sync"),
					RetryPolicy(RetryOptions{MaxAttempts: 5, BaseDelay: time.Millisecond}))
				if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1, Delay: time.Second}); err != nil {
					t.Fatal(err)
				}
				var spy stopSpy
				spy.watch(c)
				q := storage.NewMemoryQueue(0)
				var sent, refused int64 // requests for "/"; Visits after the deadline
				switch mode {
				case "async":
					for i := range pages {
						err := c.Visit(fmt.Sprintf("%s/p/%d", site.URL, i))
						switch {
						case err == nil:
						case deadline && errors.Is(err, ErrStopped) && errors.Is(err, context.DeadlineExceeded):
							refused++ // a loaded machine took 300ms to queue them
						default:
							t.Fatalf("Visit(#%d) error = %v", i, err)
						}
					}
				case "sync":
					c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
					sent = 1
				case "queue":
					for i := range pages {
						pushURL(t, q, fmt.Sprintf("%s/p/%d", site.URL, i))
					}
				}
				close(queued)
				done := make(chan error, 1)
				go func() {
					switch mode {
					case "async":
						c.Wait()
						done <- nil
					case "sync":
						done <- c.Visit(site.URL + "/")
					case "queue":
						done <- c.RunQueue(ctx, q, 1)
					}
				}()
				var end time.Time
				select {
				case end = <-ended:
				case <-time.After(time.Minute):
					t.Fatal("the context did not end: the crawl never reached its first page")
				}
				select {
				case err := <-done:
					if took := time.Since(end); took > 2*time.Second {
						t.Errorf("the crawl ended %v after its context, want within 2s", took)
					}
					if mode == "queue" && !errors.Is(err, ctx.Err()) {
						t.Errorf("RunQueue() = %v, want an error wrapping %v", err, ctx.Err())
					}
				case <-time.After(time.Minute):
					t.Fatal("the crawl did not end within a minute of its context")
				}
				hits := site.hits.Load()
				if hits > 1 {
					t.Errorf("%d pages requested, want at most 1 (the Delay is 1s)", hits)
				}
				spy.mu.Lock()
				defer spy.mu.Unlock()
				if int64(len(spy.errors)) != hits {
					t.Errorf("OnError called %d times (%v), want %d: once for the page in flight, never for a page not sent", len(spy.errors), spy.errors, hits)
				}
				for _, err := range spy.errors {
					if _, retried := errors.AsType[*RetryError](err); retried || !errors.Is(err, ctx.Err()) {
						t.Errorf("OnError(%v), want the context's error %v, not retried", err, ctx.Err())
					}
				}
				st := c.Stats()
				if st.Retries != 0 || st.BusyRetries != 0 {
					t.Errorf("Stats retries %d, busy retries %d; want none", st.Retries, st.BusyRetries)
				}
				if mode == "async" && spy.refused != refused {
					t.Errorf("OnRefused heard of %d Visits refused as stopped, want the %d Visit returned", spy.refused, refused)
				}
				// Links found after the end are refused as stopped.
				refused = spy.refused
				if len(spy.other) > 0 {
					t.Errorf("OnRefused(%v), want only refusals as stopped", spy.other)
				}
				notStarted := pages - hits - refused
				if int64(st.Requests) != sent+hits || st.NotStarted != uint64(notStarted) || st.Refused[RefusedStopped] != uint64(refused) {
					t.Errorf("Stats requests %d, not started %d, refused as stopped %d; want %d, %d and %d",
						st.Requests, st.NotStarted, st.Refused[RefusedStopped], sent+hits, notStarted, refused)
				}
				if !strings.Contains(st.String(), fmt.Sprintf("not started (crawl stopped) %d", notStarted)) {
					t.Errorf("Stats.String() = %q, want the not-started count", st.String())
				}
				if mode == "queue" {
					if l, err := q.Len(t.Context()); err != nil || l.Total() != pages {
						t.Errorf("queue Len() = %+v, %v; want all %d entries kept", l, err, pages)
					}
				}
			})
		}
	}
}

// TestContextErrorNeverRetried: the end of the crawl's context is no
// timeout, although context.DeadlineExceeded says Timeout(): a page cut
// short by the StdlibContext's deadline or cancel is sent once and reaches
// OnError once with the context's error, under a RetryPolicy that retries
// timeouts. A page that times out on its own (SetRequestTimeout) is still
// retried. A cancel with a cause (net/http then reports the cause) is the
// context's error all the same.
func TestContextErrorNeverRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ctxEnds   bool // the StdlibContext ends while the page hangs
		deadline  bool
		cause     bool // cancelled with a cause
		wantHits  int64
		wantError error
	}{
		{"deadline", true, true, false, 1, context.DeadlineExceeded},
		{"cancel", true, false, false, 1, context.Canceled},
		{"cancel with a cause", true, false, true, 1, context.Canceled},
		{"request timeout", false, false, false, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancelCause := context.WithCancelCause(t.Context())
			cancel := func() { cancelCause(nil) }
			if tc.cause {
				cancel = func() { cancelCause(errors.New("interrupted by the user")) }
			}
			defer cancel()
			if tc.deadline {
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			}
			var hits atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 && tc.ctxEnds && !tc.deadline {
					cancel()
				}
				<-r.Context().Done()
			}))
			defer ts.Close()
			c := NewCollector(StdlibContext(ctx), IgnoreRobotsTxt(),
				RetryPolicy(RetryOptions{MaxAttempts: 3, BaseDelay: time.Millisecond}))
			if !tc.ctxEnds {
				c.SetRequestTimeout(100 * time.Millisecond)
			}
			var spy stopSpy
			spy.watch(c)
			err := c.Visit(ts.URL + "/hang")
			if n := hits.Load(); n != tc.wantHits {
				t.Errorf("page sent %d times, want %d", n, tc.wantHits)
			}
			spy.mu.Lock()
			defer spy.mu.Unlock()
			if len(spy.errors) != 1 {
				t.Fatalf("OnError called %d times (%v), want once", len(spy.errors), spy.errors)
			}
			if tc.wantError == nil {
				if _, retried := errors.AsType[*RetryError](spy.errors[0]); !retried {
					t.Errorf("OnError(%v), want a *RetryError after %d attempts", spy.errors[0], tc.wantHits)
				}
				return
			}
			if spy.errors[0] != tc.wantError || err != tc.wantError {
				t.Errorf("OnError(%v), Visit() = %v; want %v itself, not retried", spy.errors[0], err, tc.wantError)
			}
			if st := c.Stats(); st.Retries != 0 {
				t.Errorf("Stats retries %d, want 0", st.Retries)
			}
		})
	}
}
