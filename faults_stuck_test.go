package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/magpiecrawl/magpie/storage"
)

// blockInCallback is the user callback that never returns (until the test
// ends): the one goroutine the leak checks may find.
func blockInCallback(entered chan<- struct{}, release <-chan struct{}) {
	select {
	case entered <- struct{}{}:
	default:
	}
	<-release
}

// stuckLeakOptions ignore what is not the crawl's: the goroutine blocked in
// blockInCallback, the test's server and the transport's idle connections.
func stuckLeakOptions(before goleak.Option) []goleak.Option {
	return []goleak.Option{
		before,
		goleak.IgnoreAnyFunction("github.com/magpiecrawl/magpie.blockInCallback"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}
}

func stuckServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<p class="block">x</p>`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// checkStuck checks that err names the stuck callback and the page.
func checkStuck(t *testing.T, err error, kind, selector, url string) {
	t.Helper()
	if !errors.Is(err, ErrCallbackStuck) {
		t.Fatalf("error = %v, want ErrCallbackStuck", err)
	}
	se, ok := errors.AsType[*CallbackStuckError](err)
	if !ok || se.Callback != kind || se.Selector != selector || se.URL != url {
		t.Errorf("error = %#v, want a *CallbackStuckError for %s(%q) at %s", se, kind, selector, url)
	}
}

// within runs f and fails the test if it does not return in a minute (a
// generous bound: the grace is 200 ms).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return in a minute with a callback blocked", what)
	}
}

// TestStuckCallback: a callback that never returns does not hang Stop, the
// end of RunQueue's context, or a sync Visit stopped from elsewhere. After
// the grace the callback is abandoned: the call returns an error naming it
// (kind, selector, URL), a queue entry is released rather than lost, and
// every goroutine of the crawl has exited but the blocked one.
func TestStuckCallback(t *testing.T) {
	const grace = 200 * time.Millisecond
	tests := []struct {
		name     string
		kind     string // OnHTML or OnRequest
		selector string
		run      func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error
	}{
		{name: "Stop, async, OnHTML", kind: "OnHTML", selector: "p.block",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				c.Async = true
				if err := c.Visit(u); err != nil {
					t.Fatalf("Visit() error = %v", err)
				}
				<-entered
				var err error
				within(t, "Stop", func() { err = c.Stop() })
				within(t, "Wait after Stop", c.Wait)
				return err
			}},
		{name: "Stop, async, OnRequest", kind: "OnRequest",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				c.Async = true
				if err := c.Visit(u); err != nil {
					t.Fatalf("Visit() error = %v", err)
				}
				<-entered
				var err error
				within(t, "Stop", func() { err = c.Stop() })
				return err
			}},
		{name: "Stop, async, item pipeline", kind: "item pipeline",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				c.Async = true
				if err := c.Visit(u); err != nil {
					t.Fatalf("Visit() error = %v", err)
				}
				<-entered
				var err error
				within(t, "Stop", func() { err = c.Stop() })
				return err
			}},
		{name: "sync Visit, Stop from another goroutine", kind: "OnHTML", selector: "p.block",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				visitErr := make(chan error, 1)
				go func() { visitErr <- c.Visit(u) }()
				<-entered
				var stopErr error
				within(t, "Stop", func() { stopErr = c.Stop() })
				checkStuck(t, stopErr, "OnHTML", "p.block", u)
				select {
				case err := <-visitErr:
					return err // the page's own outcome
				case <-time.After(time.Minute):
					t.Fatal("Visit did not return in a minute after Stop")
				}
				return nil
			}},
		{name: "sync Visit, StdlibContext ends", kind: "OnHTML", selector: "p.block",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				c.Context = ctx
				visitErr := make(chan error, 1)
				go func() { visitErr <- c.Visit(u) }()
				<-entered
				cancel()
				select {
				case err := <-visitErr:
					return err
				case <-time.After(time.Minute):
					t.Fatal("Visit did not return in a minute after its StdlibContext ended")
				}
				return nil
			}},
		{name: "Wait, StdlibContext ends", kind: "OnRequest",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				c.Context = ctx
				c.Async = true
				var onErr atomic.Pointer[error]
				c.OnError(func(_ *Response, err error) { onErr.Store(&err) })
				if err := c.Visit(u); err != nil {
					t.Fatalf("Visit() error = %v", err)
				}
				<-entered
				cancel()
				within(t, "Wait", c.Wait)
				// Wait returns nothing: OnError hears of the stuck callback.
				p := onErr.Load()
				if p == nil {
					t.Fatal("OnError not called for the stuck callback")
				}
				return *p
			}},
		{name: "RunQueue context ends", kind: "OnHTML", selector: "p.block",
			run: func(t *testing.T, c *Collector, u string, entered <-chan struct{}) error {
				q := storage.NewMemoryQueue(0)
				defer q.Close()
				pushURL(t, q, u)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				runErr := make(chan error, 1)
				go func() { runErr <- c.RunQueue(ctx, q, 2) }()
				<-entered
				cancel()
				var err error
				select {
				case err = <-runErr:
				case <-time.After(time.Minute):
					t.Fatal("RunQueue did not return in a minute after its context ended")
				}
				if !errors.Is(err, context.Canceled) {
					t.Errorf("RunQueue() error = %v, want context.Canceled joined", err)
				}
				// The entry is released for the next run, not acknowledged.
				if l, lerr := q.Len(t.Context()); lerr != nil || l.Total() != 1 || l.Leased != 0 {
					t.Errorf("queue after RunQueue = %+v, %v; want the page's entry back, unleased", l, lerr)
				}
				// The next run fetches it and finishes.
				c2 := NewCollector(IgnoreRobotsTxt())
				if err := c2.RunQueue(t.Context(), q, 1); err != nil {
					t.Errorf("second RunQueue() error = %v", err)
				}
				if l, _ := q.Len(t.Context()); l.Total() != 0 {
					t.Errorf("queue after the second run = %+v, want empty", l)
				}
				return err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := stuckServer(t)
			before := goleak.IgnoreCurrent()
			u := srv.URL + "/page"
			entered := make(chan struct{}, 1)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			c := NewCollector(IgnoreRobotsTxt(), StopGrace(grace))
			switch tt.kind {
			case "OnHTML":
				c.OnHTML("p.block", func(*HTMLElement) { blockInCallback(entered, release) })
			case "OnRequest":
				c.OnRequest(func(*Request) { blockInCallback(entered, release) })
			case "item pipeline":
				c.OnResponse(func(r *Response) { r.Emit("item") })
				c.Pipeline(func(context.Context, *Item) error { blockInCallback(entered, release); return nil })
			}
			err := tt.run(t, c, u, entered)
			checkStuck(t, err, tt.kind, tt.selector, u)
			c.shared.backend.get().CloseIdleConnections()
			if err := goleak.Find(stuckLeakOptions(before)...); err != nil {
				t.Errorf("goroutines left besides the blocked callback: %v", err)
			}
		})
	}
}
