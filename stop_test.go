package magpie

import (
	"fmt"
	"testing"
	"time"
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
