package magpie

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestContextMarshalBinary(t *testing.T) {
	ctx := NewContext()
	ctx.Put("name", "magpie")
	ctx.Put("n", 3)
	data, err := ctx.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary() error = %v", err)
	}
	got := NewContext()
	got.Put("stale", "x")
	if err := got.UnmarshalBinary(data); err != nil {
		t.Fatalf("UnmarshalBinary() error = %v", err)
	}
	if got.Get("name") != "magpie" || got.GetAny("n") != float64(3) || got.Len() != 2 {
		t.Errorf("round trip gave name=%q n=%v len=%d, want magpie, 3, 2", got.Get("name"), got.GetAny("n"), got.Len())
	}
	if err := got.UnmarshalBinary([]byte("{")); err == nil {
		t.Error("UnmarshalBinary of bad JSON succeeded")
	}
	ctx.Put("bad", func() {})
	if _, err := ctx.MarshalBinary(); err == nil {
		t.Error("MarshalBinary of a func value succeeded")
	}
}

func TestCollectorInitResets(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(MaxDepth(2), AllowedDomains("example.org"), Async())
	c.OnResponse(func(*Response) {})
	if err := c.Visit(ts.URL + "/html"); !errors.Is(err, ErrForbiddenDomain) {
		t.Fatalf("Visit before Init error = %v, want ErrForbiddenDomain", err)
	}
	id := c.ID
	c.Init()
	if c.MaxDepth != 0 || c.AllowedDomains != nil || c.Async || c.UserAgent != defaultUserAgent || c.ID == id {
		t.Errorf("after Init: MaxDepth %d, AllowedDomains %v, Async %v, UA %q, ID %d (was %d); want defaults and a new ID",
			c.MaxDepth, c.AllowedDomains, c.Async, c.UserAgent, c.ID, id)
	}
	if err := c.Visit(ts.URL + "/html"); err != nil {
		t.Fatalf("Visit after Init error = %v", err)
	}
	if n := c.snapshotCallbacks().count().response; n != 1 {
		t.Errorf("OnResponse callbacks after Init = %d, want 1 (kept)", n)
	}
}

// TestCollectorInitResetsOptions checks that Init resets every option, as
// its doc says, including those kept only in unexported settings.
func TestCollectorInitResetsOptions(t *testing.T) {
	c := NewCollector(Workers(4), MaxParked(8), QueueLookahead(64), RetryPolicy(RetryOptions{MaxAttempts: 3}),
		MaxPending(5), StopGrace(3*time.Second), BusyRetries(2), SitemapsFromRobots(), ProgressInterval(time.Minute), StreamHTML(),
		Prioritize(func(*Request) int { return 1 }), DepthFirst())
	c.Init()
	s := c.settings
	s.logger = nil
	if s != (settings{}) {
		t.Errorf("settings after Init = %+v, want every knob at its default", s)
	}
	if c.logger == nil {
		t.Error("logger after Init is nil, want the silent default")
	}
	n := NewCollector(MaxPending(5), StopGrace(3*time.Second), BusyRetries(2), StreamHTML()).Clone()
	if n.maxPending != 5 || n.stopGrace != 3*time.Second || n.busyRetries != 2 || !n.streamHTML {
		t.Errorf("Clone settings = %+v, want the original's", n.settings)
	}
}

func TestAppengineSetsContext(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Appengine(ctx)
	if err := c.Visit(ts.URL + "/html"); !errors.Is(err, context.Canceled) {
		t.Errorf("Visit under a cancelled Appengine context error = %v, want context.Canceled", err)
	}
}

func TestCheckRevisitKeyInRedirectHandler(t *testing.T) {
	ts := newTestServer(t)
	for _, allow := range []bool{false, true} {
		c := NewCollector(IgnoreRobotsTxt())
		c.AllowURLRevisit = allow
		seen := make(chan any, 4)
		c.SetRedirectHandler(func(req *http.Request, via []*http.Request) error {
			seen <- req.Context().Value(CheckRevisitKey)
			return nil
		})
		if err := c.Visit(ts.URL + "/redirect"); err != nil {
			t.Fatalf("Visit(/redirect) error = %v", err)
		}
		if got := <-seen; got != !allow {
			t.Errorf("AllowURLRevisit=%v: CheckRevisitKey = %v, want %v", allow, got, !allow)
		}
	}
}
