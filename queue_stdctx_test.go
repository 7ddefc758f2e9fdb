package magpie

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// A queue run whose collector has a StdlibContext: when that context ends,
// the fetches in flight fail with it at once, and their pages were never
// fetched, so their entries must go back to the queue, not be acknowledged
// as done; and the run must end, not lease every other entry only to fail
// it. Both with the StdlibContext the run's own context (the CLI's Ctrl-C)
// and with a StdlibContext that ends on its own.
func TestRunQueueStdlibContextEnds(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run("same="+strconv.FormatBool(same), func(t *testing.T) {
			reached := make(chan struct{}, 1)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hang" {
					select {
					case reached <- struct{}{}:
					default:
					}
					<-r.Context().Done()
					return
				}
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<p>ok</p>"))
			}))
			defer ts.Close()
			q := newMemQueue()
			pushURL(t, q, ts.URL+"/hang")
			const others = 50
			for i := range others {
				pushURL(t, q, ts.URL+"/p/"+strconv.Itoa(i))
			}
			std, cancel := context.WithCancel(t.Context())
			defer cancel()
			c := NewCollector(StdlibContext(std), IgnoreRobotsTxt())
			// One download at a time and the hanging page first: when
			// the context ends, the rest are all still queued.
			c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1})
			var errs atomic.Int32
			c.OnError(func(*Response, error) { errs.Add(1) })
			go func() {
				select {
				case <-reached:
					cancel()
				case <-time.After(time.Minute):
				}
			}()
			runCtx := t.Context()
			if same {
				runCtx = std
			}
			done := make(chan error, 1)
			go func() { done <- c.RunQueue(runCtx, q, 1) }()
			select {
			case err := <-done:
				if same && !errors.Is(err, context.Canceled) {
					t.Errorf("RunQueue() = %v, want context.Canceled", err)
				}
				if !same && !errors.Is(err, context.Canceled) {
					t.Errorf("RunQueue() with the StdlibContext ended = %v, want an error wrapping context.Canceled", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("RunQueue did not return after the StdlibContext ended")
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			if left := len(q.ready) + len(q.leased); left != others+1 || q.acked != 0 {
				t.Errorf("queue holds %d entries, %d acknowledged; want all %d kept and none acknowledged (OnError ran %d times)",
					left, q.acked, others+1, errs.Load())
			}
		})
	}
}
