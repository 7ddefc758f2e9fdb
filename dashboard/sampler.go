package dashboard

import (
	"runtime/metrics"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie"
)

// historyLen is how many one-second points the charts keep: an hour.
const historyLen = 3600

// Point is one second of a chart: the pages (responses) and the failures
// (OnError deliveries) counted in the second that ended at T.
type Point struct {
	// T is the end of the second, in Unix milliseconds.
	T        int64   `json:"t"`
	Pages    float64 `json:"pages"`
	Failures float64 `json:"failures"`
}

// sampler reads the collector's counters once a second into a fixed ring
// of points, and the process's memory.
type sampler struct {
	c    *magpie.Collector
	tick time.Duration
	// mu guards every field below.
	mu                  sync.Mutex
	ring                [historyLen]Point
	n                   int // points ever added; the next goes to ring[n%historyLen]
	lastPages, lastFail uint64
	last                time.Time
	memory              uint64
	mem                 []metrics.Sample
}

func newSampler(c *magpie.Collector, tick time.Duration) *sampler {
	s := &sampler{c: c, tick: tick, mem: []metrics.Sample{
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"},
	}}
	s.sample(time.Now())
	s.n = 0 // the first read sets the baseline; it is no point
	return s
}

// run samples every tick until done is closed; the Handler owns it.
func (s *sampler) run(done <-chan struct{}) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

// sample adds the point of the time since the last sample.
func (s *sampler) sample(now time.Time) {
	st := s.c.Stats()
	pages, failed := uint64(st.Responses), sum(st.Failed)
	metrics.Read(s.mem)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem[0].Value.Kind() == metrics.KindUint64 {
		s.memory = s.mem[0].Value.Uint64() - s.mem[1].Value.Uint64()
	}
	p := Point{T: now.UnixMilli()}
	if !s.last.IsZero() {
		secs := max(now.Sub(s.last).Seconds(), 1e-3)
		p.Pages = float64(pages-min(pages, s.lastPages)) / secs
		p.Failures = float64(failed-min(failed, s.lastFail)) / secs
	}
	s.ring[s.n%historyLen] = p
	s.n++
	s.lastPages, s.lastFail, s.last = pages, failed, now
}

// points returns the points kept, the oldest first, at most the last max
// (<= 0: all).
func (s *sampler) points(max int) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := min(s.n, historyLen)
	if max > 0 {
		k = min(k, max)
	}
	out := make([]Point, 0, k)
	for i := s.n - k; i < s.n; i++ {
		out = append(out, s.ring[i%historyLen])
	}
	return out
}

// latest returns the newest point (zero before the first) and the memory
// the process holds.
func (s *sampler) latest() (Point, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return Point{}, s.memory
	}
	return s.ring[(s.n-1)%historyLen], s.memory
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
