package limits

import (
	"sync"
	"testing"
	"time"
)

// req is a fake request: a host key and its Put order within the host.
type req struct {
	host string
	n    int
}

// record is what a simulated crawl observed.
type record struct {
	mu       sync.Mutex
	starts   map[string][]time.Time
	order    map[string][]int
	inflight map[string]int
	maxHost  map[string]int
	total    int
	maxTotal int
	elapsed  time.Duration
}

func (r *record) start(q req) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts[q.host] = append(r.starts[q.host], time.Now())
	r.order[q.host] = append(r.order[q.host], q.n)
	r.inflight[q.host]++
	r.maxHost[q.host] = max(r.maxHost[q.host], r.inflight[q.host])
	r.total++
	r.maxTotal = max(r.maxTotal, r.total)
}

func (r *record) end(q req) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight[q.host]--
	r.total--
}

// minGap is the least gap between consecutive starts to host.
func (r *record) minGap(host string) time.Duration {
	s := r.starts[host]
	gap := time.Duration(1<<63 - 1)
	for i := 1; i < len(s); i++ {
		gap = min(gap, s[i].Sub(s[i-1]))
	}
	return gap
}

// download is a fake transport: it waits out the latency in virtual time
// and returns what the server "said".
type download func(q req) (time.Duration, Result)

func fixed(lat time.Duration) download {
	return func(req) (time.Duration, Result) { return lat, Result{StatusCode: 200, Latency: lat} }
}

// reqs makes n requests for each host, Put host by host (the worst order
// for a FIFO that would let one host block the others).
func reqs(n int, hosts ...string) []req {
	var out []req
	for _, h := range hosts {
		for i := range n {
			out = append(out, req{h, i})
		}
	}
	return out
}

// simulate runs a crawl of qs through g with the given number of workers:
// one feeder Puts, one dispatcher Gets only when a worker is free, and each
// worker downloads and calls Done, as the Collector does. Call it inside a
// synctest bubble.
func simulate(t *testing.T, g *Gate[req], qs []req, workers int, dl download) *record {
	t.Helper()
	ctx := t.Context()
	rec := &record{
		starts: map[string][]time.Time{}, order: map[string][]int{},
		inflight: map[string]int{}, maxHost: map[string]int{},
	}
	begin := time.Now()
	var wg sync.WaitGroup
	feedErr := make(chan error, 1)
	wg.Go(func() {
		for _, q := range qs {
			if err := g.Put(ctx, q.host, q); err != nil {
				feedErr <- err
				return
			}
		}
	})
	free := make(chan struct{}, workers)
	for range workers {
		free <- struct{}{}
	}
	for range qs {
		<-free
		q, tk, err := g.Get(ctx)
		if err != nil {
			t.Fatalf("Get() error = %v, want nil", err)
		}
		rec.start(q)
		wg.Go(func() {
			lat, res := dl(q)
			<-time.After(lat)
			rec.end(q)
			tk.Done(res)
			free <- struct{}{}
		})
	}
	wg.Wait()
	rec.elapsed = time.Since(begin)
	select {
	case err := <-feedErr:
		t.Fatalf("Put() error = %v, want nil", err)
	default:
	}
	for h, order := range rec.order {
		for i, n := range order {
			if n != i {
				t.Errorf("host %s: start #%d was request %d, want Put order", h, i, n)
				break
			}
		}
	}
	return rec
}

func newLimiter(t *testing.T, opts []Option, rules ...*Rule) *Limiter {
	t.Helper()
	l := New(opts...)
	if err := l.Add(rules...); err != nil {
		t.Fatalf("Add() error = %v, want nil", err)
	}
	return l
}
