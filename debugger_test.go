package magpie

import (
	"slices"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/debug"
)

// recordingDebugger keeps every event it is sent.
type recordingDebugger struct {
	mu     sync.Mutex
	inits  int
	events []debug.Event
}

func (d *recordingDebugger) Init() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inits++
	return nil
}

func (d *recordingDebugger) Event(e *debug.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, *e)
}

// types returns the event types sent for the request with URL u, in order.
func (d *recordingDebugger) types(u string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, e := range d.events {
		if e.Values["url"] == u {
			out = append(out, e.Type)
		}
	}
	return out
}

func TestDebuggerEventsFollowTheRequest(t *testing.T) {
	ts := newTestServer(t)
	d := &recordingDebugger{}
	c := NewCollector(Debugger(d))
	c.OnHTML("p.x", func(*HTMLElement) {})
	if err := c.Visit(ts.URL + "/html"); err != nil {
		t.Fatalf("Visit(/html) error = %v", err)
	}
	if d.inits != 1 {
		t.Errorf("Init called %d times, want 1", d.inits)
	}
	got := d.types(ts.URL + "/html")
	want := []string{debug.EventRequest, debug.EventRequestHeaders, debug.EventResponseHeaders, debug.EventResponse,
		debug.EventHTML, debug.EventHTML, debug.EventScraped}
	if !slices.Equal(got, want) {
		t.Errorf("events for /html = %v, want %v", got, want)
	}
	d.mu.Lock()
	for _, e := range d.events {
		if e.CollectorID != c.ID {
			t.Errorf("event %s has CollectorID %d, want %d", e.Type, e.CollectorID, c.ID)
		}
		if e.RequestID == 0 {
			t.Errorf("event %s has no RequestID", e.Type)
		}
		if e.Type == debug.EventHTML && e.Values["selector"] != "p.x" {
			t.Errorf("html event selector = %q, want p.x", e.Values["selector"])
		}
	}
	d.mu.Unlock()
}

func TestDebuggerErrorEvent(t *testing.T) {
	ts := newTestServer(t)
	d := &recordingDebugger{}
	c := NewCollector()
	c.SetDebugger(d)
	_ = c.Visit(ts.URL + "/500")
	got := d.types(ts.URL + "/500")
	if len(got) == 0 || got[len(got)-1] != debug.EventError {
		t.Fatalf("events for /500 = %v, want them to end with %q", got, debug.EventError)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.events {
		if e.Type == debug.EventError && e.Values["status"] != "500" {
			t.Errorf("error event status = %q, want 500", e.Values["status"])
		}
	}
}

func TestDebuggerSharedWithClonesAndDetachable(t *testing.T) {
	ts := newTestServer(t)
	d := &recordingDebugger{}
	c := NewCollector(Debugger(d))
	clone := c.Clone()
	if err := clone.Visit(ts.URL + "/leaf"); err != nil {
		t.Fatalf("clone.Visit error = %v", err)
	}
	if len(d.types(ts.URL+"/leaf")) == 0 {
		t.Fatal("a clone made after SetDebugger sent no events")
	}
	c.SetDebugger(nil)
	if err := c.Visit(ts.URL + "/a"); err != nil {
		t.Fatalf("Visit(/a) error = %v", err)
	}
	if got := d.types(ts.URL + "/a"); len(got) != 0 {
		t.Errorf("detached debugger got events %v", got)
	}
}
