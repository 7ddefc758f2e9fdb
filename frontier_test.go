package magpie

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/storage"
)

// TestRunQueueRedelivery simulates a consumer that died after leasing the
// root entry (its visited mark stays, its lease expires): the next delivery
// must take the mark over instead of being refused as visited. Links are
// marked only when their own entry is leased, so the root's child is fetched
// exactly once whether or not the dead consumer had pushed it already. A
// first delivery of a visited URL is still refused.
func TestRunQueueRedelivery(t *testing.T) {
	tests := []struct {
		name        string
		earlier     bool // the root entry was leased once before
		childPushed bool // the dead consumer pushed the child before dying
		wantRoot    int  // fetches of /
		wantChild   int  // fetches of /a
		wantRefusal bool // the root reached OnError as AlreadyVisitedError
	}{
		{name: "first delivery", earlier: false, wantRoot: 0, wantChild: 0, wantRefusal: true},
		{name: "redelivery", earlier: true, wantRoot: 1, wantChild: 1},
		{name: "redelivery after the child was pushed", earlier: true, childPushed: true, wantRoot: 1, wantChild: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t)
			c := NewCollector(IgnoreRobotsTxt())
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			var refused atomic.Bool
			c.OnRefused(func(r *Request, err error) {
				var ave *AlreadyVisitedError
				if errors.As(err, &ave) && ave.Destination.Path == "/" && r.Depth == 1 {
					refused.Store(true)
				}
			})
			// The dead consumer leased /, which marked it.
			key := urlkey.RequestKey(http.MethodGet, urlkey.Canonical(mustParse(t, ts.URL+"/"), false), nil)
			if _, err := c.markVisited(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			var q storage.Queue = storage.NewMemoryQueue(0)
			pushURL(t, q, ts.URL+"/")
			if tt.childPushed {
				pushURL(t, q, ts.URL+"/a")
			}
			if tt.earlier {
				q = &expiredOnce{Queue: q}
			}
			if err := c.RunQueue(t.Context(), q, 2); err != nil {
				t.Fatalf("RunQueue() error = %v, want nil", err)
			}
			if got := ts.count("/"); got != tt.wantRoot {
				t.Errorf("fetches of / = %d, want %d", got, tt.wantRoot)
			}
			if got := ts.count("/a"); got != tt.wantChild {
				t.Errorf("fetches of /a = %d, want %d", got, tt.wantChild)
			}
			if got := refused.Load(); got != tt.wantRefusal {
				t.Errorf("/ refused as visited = %v, want %v", got, tt.wantRefusal)
			}
		})
	}
}

// expiredOnce is a queue whose first lease hands out an entry that another
// consumer leased before and lost (Deliveries 2), as after a crash.
type expiredOnce struct {
	storage.Queue
	done atomic.Bool
}

func (q *expiredOnce) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	es, err := q.Queue.Lease(ctx, n, ttl)
	if err == nil && len(es) > 0 && !q.done.Swap(true) {
		es[0].Deliveries++
	}
	return es, err
}
