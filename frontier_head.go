package magpie

import (
	"container/heap"
	"context"
	"fmt"
	"net/http"

	"github.com/magpiecrawl/magpie/storage"
)

// HeadEntry is one request waiting in the frontier, as FrontierHead lists
// it. URL has its password redacted.
type HeadEntry struct {
	URL    string `json:"url"`
	Method string `json:"method"`
	// Host is the host the request waits under (its URL's host:port, or
	// a queue run's politeness key).
	Host     string `json:"host"`
	Priority int    `json:"priority"`
	Depth    int    `json:"depth"`
}

// FrontierHead lists up to n of the requests the current crawl will start
// next (not in Colly), in about the order they will leave the frontier
// (a host's Delay and the gate may reorder them), without taking them:
// for people watching a crawl, not for scheduling. Retries waiting out a
// Retry-After are not listed (Stats.Waits lists them).
//
// The requests waiting in the politeness gate for their host's turn come
// first; then an in-memory crawl lists its own frontier, and a queue run
// asks its queue, which must implement storage.HostQueue's Head: for any
// other the error wraps storage.ErrUnsupported (with the gate's requests
// listed). ErrNoCrawl when no crawl runs. Safe for
// concurrent use; it holds the frontier's lock for a time that grows with
// n, not with the frontier's size.
func (c *Collector) FrontierHead(ctx context.Context, n int) ([]HeadEntry, error) {
	c.runMu.Lock()
	r := c.run
	c.runMu.Unlock()
	if r == nil {
		return nil, ErrNoCrawl
	}
	if n <= 0 {
		return nil, nil
	}
	// First the requests taken already and waiting for their host's turn
	// in the gate; then the frontier's.
	out := make([]HeadEntry, 0, n)
	r.gate.Peek(n, func(host string, req *Request) {
		out = append(out, HeadEntry{URL: req.URL.Redacted(), Method: req.Method, Host: host, Depth: req.Depth, Priority: req.Priority})
	})
	if len(out) == n {
		return out, nil
	}
	var more []HeadEntry
	var err error
	switch f := r.front.(type) {
	case *memFrontier:
		more = f.head(n - len(out))
	case *queueFrontier:
		more, err = c.queueHead(ctx, f.q, n-len(out))
	default:
		err = fmt.Errorf("frontier head: %w", storage.ErrUnsupported)
	}
	return append(out, more...), err
}

// queueHead lists the head of a queue run's queue through HostQueue.Head.
func (c *Collector) queueHead(ctx context.Context, q storage.Queue, n int) ([]HeadEntry, error) {
	hq, ok := q.(storage.HostQueue)
	if !ok {
		return nil, fmt.Errorf("frontier head of a %T: %w", q, storage.ErrUnsupported)
	}
	entries, err := hq.Head(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]HeadEntry, 0, len(entries))
	for _, e := range entries {
		h := HeadEntry{Host: e.Host, Priority: e.Priority}
		if req, err := c.unmarshalRequest(e.Data); err == nil {
			h.URL, h.Method, h.Depth = req.URL.Redacted(), req.Method, req.Depth
		} else {
			h.URL = "(undecodable entry)"
		}
		out = append(out, h)
	}
	return out, nil
}

// headCursor is a place in a host queue: its i-th item (counted from
// head while the queue is a FIFO, an index of its heap once heaped).
type headCursor struct {
	q *hostQueue
	i int
}

func (h headCursor) item() *pendingReq {
	if h.q.heaped {
		return &h.q.items[h.i]
	}
	return &h.q.items[h.q.head+h.i]
}

// headMerge orders cursors as take serves requests: by pendingReq.first
// (priority, then arrival), which orders the hosts (hostHeap) and each
// host's own queue.
type headMerge []headCursor

func (m headMerge) Len() int           { return len(m) }
func (m headMerge) Less(i, j int) bool { return m[i].item().first(m[j].item()) }
func (m headMerge) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *headMerge) Push(x any)        { *m = append(*m, x.(headCursor)) }
func (m *headMerge) Pop() any {
	old := *m
	x := old[len(old)-1]
	*m = old[:len(old)-1]
	return x
}

// head lists up to n ready requests in the order take would serve them
// (pacing aside). Heaps are walked from their roots: a host enters the
// merge when its parent in its host heap has given its first request, and
// a heaped host's item when its parent item has been listed (a FIFO
// host's next item when the one before it has), so the walk costs
// O(n log n), whatever the number of hosts and requests.
func (f *memFrontier) head(n int) []HeadEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m headMerge
	for _, h := range []hostHeap{f.under, f.over} {
		if len(h) > 0 && h[0].len() > 0 {
			m = append(m, headCursor{q: h[0]})
		}
	}
	heap.Init(&m)
	out := make([]HeadEntry, 0, n)
	for len(m) > 0 && len(out) < n {
		cur := heap.Pop(&m).(headCursor)
		out = append(out, headEntry(cur.q.key, cur.item()))
		if cur.q.heaped {
			for _, child := range []int{2*cur.i + 1, 2*cur.i + 2} {
				if child < len(cur.q.items) {
					heap.Push(&m, headCursor{q: cur.q, i: child})
				}
			}
		} else if cur.i+1 < cur.q.len() {
			heap.Push(&m, headCursor{q: cur.q, i: cur.i + 1})
		}
		if cur.i == 0 {
			hh := f.under
			if cur.q.inOver {
				hh = f.over
			}
			for _, child := range []int{2*cur.q.idx + 1, 2*cur.q.idx + 2} {
				if child < len(hh) && hh[child].len() > 0 {
					heap.Push(&m, headCursor{q: hh[child]})
				}
			}
		}
	}
	return out
}

// headEntry describes p, a request of host key.
func headEntry(key string, p *pendingReq) HeadEntry {
	if r := p.full; r != nil {
		return HeadEntry{URL: r.URL.Redacted(), Method: r.Method, Host: key, Depth: r.Depth, Priority: r.Priority}
	}
	// A compact URL has no user info (compactURL): nothing to redact.
	return HeadEntry{URL: p.url, Method: http.MethodGet, Host: key, Depth: int(p.depth), Priority: int(p.prio)}
}

// queuedByHost counts the ready requests of each host.
func (f *memFrontier) queuedByHost() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.hosts))
	for k, q := range f.hosts {
		if n := q.len(); n > 0 {
			m[k] = n
		}
	}
	return m
}
