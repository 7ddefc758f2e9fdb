package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// memQueue is a minimal storage.Queue for these tests.
type memQueue struct {
	mu     sync.Mutex
	ready  []storage.Entry
	leased map[string]storage.Entry
	seq    int
	acked  int
}

func newMemQueue() *memQueue { return &memQueue{leased: map[string]storage.Entry{}} }

func (q *memQueue) Push(_ context.Context, data ...[]byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range data {
		q.seq++
		q.ready = append(q.ready, storage.Entry{ID: strconv.Itoa(q.seq), Data: d})
	}
	return nil
}

func (q *memQueue) Lease(_ context.Context, n int, _ time.Duration) ([]storage.Entry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ready) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	n = min(n, len(q.ready))
	out := q.ready[:n:n]
	q.ready = q.ready[n:]
	for i := range out {
		out[i].Deliveries++
		q.leased[out[i].ID] = out[i]
	}
	return out, nil
}

func (q *memQueue) Ack(_ context.Context, ids ...string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if _, ok := q.leased[id]; !ok {
			return storage.ErrUnknownLease
		}
		delete(q.leased, id)
		q.acked++
	}
	return nil
}

func (q *memQueue) Release(_ context.Context, id string, _ time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.leased[id]
	if !ok {
		return storage.ErrUnknownLease
	}
	delete(q.leased, id)
	q.ready = append(q.ready, e)
	return nil
}

func (q *memQueue) Len(context.Context) (storage.QueueLen, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return storage.QueueLen{Ready: len(q.ready), Leased: len(q.leased)}, nil
}

func (q *memQueue) Close() error { return nil }

func pushURL(t *testing.T, q storage.Queue, u string) {
	t.Helper()
	r := &Request{URL: mustParse(t, u), Method: http.MethodGet}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Push(t.Context(), b); err != nil {
		t.Fatal(err)
	}
}

func TestRunQueue(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ts := newTestServer(t)
			q := newMemQueue()
			c := NewCollector(Async(async))
			var n atomic.Int32
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.DOM.AttrOr("href", "")) })
			c.OnResponse(func(*Response) { n.Add(1) })
			pushURL(t, q, ts.URL+"/")
			if err := q.Push(t.Context(), []byte("not json")); err != nil {
				t.Fatal(err)
			}
			err := c.RunQueue(t.Context(), q, 2)
			if !errors.Is(err, ErrUndecodableRequest) {
				t.Errorf("RunQueue error = %v, want ErrUndecodableRequest", err)
			}
			if got := n.Load(); got != 7 {
				t.Errorf("responses = %d, want 7", got)
			}
			if l, _ := q.Len(t.Context()); l.Total() != 0 {
				t.Errorf("queue left %+v, want empty", l)
			}
		})
	}
}

func TestRunQueueMaxRequestsAndRefusals(t *testing.T) {
	ts := newTestServer(t)
	q := newMemQueue()
	c := NewCollector(MaxRequests(10), DisallowedDomains("localhost"))
	var refused atomic.Int32
	c.OnRefused(func(r *Request, err error) {
		if r == nil || r.URL == nil {
			t.Error("OnRefused got no Request")
		}
		refused.Add(1)
	})
	pushURL(t, q, "http://localhost:1/forbidden")
	for i := range 20 {
		pushURL(t, q, fmt.Sprintf("%s/leaf?i=%d", ts.URL, i))
	}
	if err := c.RunQueue(t.Context(), q, 1); err != nil {
		t.Fatalf("RunQueue error = %v", err)
	}
	if n := ts.count("/leaf"); n != 10 {
		t.Errorf("fetches = %d, want 10", n)
	}
	// The budget stops the leasing: the entries past it are not refused
	// (and deleted) but stay in the queue for a later run.
	if n := refused.Load(); n != 1 {
		t.Errorf("OnRefused calls = %d, want 1 (the forbidden domain)", n)
	}
	if l, _ := q.Len(t.Context()); l.Total() != 10 {
		t.Errorf("queue left %+v, want 10 entries", l)
	}
	if err := NewCollector().RunQueue(t.Context(), q, 1); err != nil {
		t.Fatalf("second RunQueue error = %v", err)
	}
	if n := ts.count("/leaf"); n != 20 {
		t.Errorf("fetches after a second run = %d, want 20", n)
	}
}

func TestRunQueueStopReleases(t *testing.T) {
	release := make(chan struct{})
	ts := newTestServer(t)
	q := newMemQueue()
	c := NewCollector(IgnoreRobotsTxt())
	c.OnRequest(func(*Request) { <-release })
	for i := range 10 {
		pushURL(t, q, fmt.Sprintf("%s/leaf?i=%d", ts.URL, i))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(ctx, q, 2) }()
	cancel()
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunQueue error = %v, want context.Canceled", err)
	}
	l, _ := q.Len(t.Context())
	if l.Leased != 0 {
		t.Errorf("entries still leased after cancel = %d, want 0", l.Leased)
	}
	if got := l.Total() + q.acked; got != 10 {
		t.Errorf("entries in queue + acknowledged = %d, want 10 (none lost)", got)
	}
}
