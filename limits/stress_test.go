package limits

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestGateProperties mixes rules, Crawl-delay, 429s with Retry-After,
// random latencies and several concurrent dispatchers, and checks the
// invariants: every item comes out exactly once, in Put order per serial host,
// per-host parallelism and delays hold, TotalParallelism holds, and no
// start falls inside a Retry-After.
func TestGateProperties(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkProperties(t, seed) })
		})
	}
}

func checkProperties(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 42))
	var rndMu sync.Mutex
	random := func(n int) int {
		rndMu.Lock()
		defer rndMu.Unlock()
		return rnd.IntN(n)
	}
	l := newLimiter(t, nil,
		&Rule{DomainGlob: "a*", Delay: 100 * ms, Parallelism: 2},
		&Rule{DomainGlob: "b*", Parallelism: 1, TotalParallelism: 2},
		&Rule{DomainRegexp: `^c`, Delay: 20 * ms, RandomDelay: 50 * ms, Parallelism: 3},
	)
	l.SetCrawlDelay("d0", 150*ms)
	hosts := []string{"a0", "a1", "b0", "b1", "b2", "c0", "d0", "e0", "e1"}
	g := NewGate[req](l, 8)
	ctx := t.Context()

	const perHost = 25
	type hostLog struct {
		starts   []time.Time
		next     int
		inflight int
		holdTill time.Time
		seen     map[int]bool
	}
	var mu sync.Mutex
	logs := map[string]*hostLog{}
	for _, h := range hosts {
		logs[h] = &hostLog{seen: map[int]bool{}}
	}
	bInflight := 0
	var wg sync.WaitGroup
	wg.Go(func() {
		counts := map[string]int{}
		for range perHost * len(hosts) {
			h := hosts[random(len(hosts))]
			for counts[h] == perHost {
				h = hosts[random(len(hosts))]
			}
			if err := g.Put(ctx, h, req{h, counts[h]}); err != nil {
				t.Errorf("Put() error = %v", err)
				return
			}
			counts[h]++
		}
	})
	workers := make(chan struct{}, 6)
	for range cap(workers) {
		workers <- struct{}{}
	}
	remaining := perHost * len(hosts)
	for range 3 { // dispatchers
		wg.Go(func() {
			for {
				<-workers
				mu.Lock()
				if remaining == 0 {
					mu.Unlock()
					workers <- struct{}{}
					return
				}
				remaining--
				mu.Unlock()
				q, tk, err := g.Get(ctx)
				if err != nil {
					t.Errorf("Get() error = %v", err)
					return
				}
				now := time.Now()
				mu.Lock()
				hl := logs[q.host]
				par := map[byte]int{'a': 2, 'b': 1, 'c': 3, 'd': 1}[q.host[0]]
				// Two dispatchers may log two starts of one host in either
				// order, so Put order is checked where starts are serial.
				if hl.seen[q.n] {
					t.Errorf("host %s: request %d came out twice", q.host, q.n)
				}
				hl.seen[q.n] = true
				if par == 1 && q.n != hl.next {
					t.Errorf("host %s: got request %d, want %d (Put order)", q.host, q.n, hl.next)
				}
				hl.next++
				if now.Before(hl.holdTill) {
					t.Errorf("host %s: start %v inside a Retry-After", q.host, hl.holdTill.Sub(now))
				}
				hl.starts = append(hl.starts, now)
				hl.inflight++
				if par > 0 && hl.inflight > par {
					t.Errorf("host %s: %d in flight, want <= %d", q.host, hl.inflight, par)
				}
				if q.host[0] == 'b' {
					if bInflight++; bInflight > 2 {
						t.Errorf("b* hosts: %d in flight, want <= 2 (TotalParallelism)", bInflight)
					}
				}
				mu.Unlock()
				wg.Go(func() {
					lat := time.Duration(1+random(300)) * ms
					<-time.After(lat) // the fake download, in virtual time
					res := Result{StatusCode: 200, Latency: lat}
					if random(10) == 0 {
						res = Result{StatusCode: 429, RetryAfter: time.Duration(random(3)) * time.Second}
					}
					mu.Lock()
					hl := logs[q.host]
					hl.inflight--
					if q.host[0] == 'b' {
						bInflight--
					}
					if till := time.Now().Add(res.RetryAfter); till.After(hl.holdTill) {
						hl.holdTill = till
					}
					mu.Unlock()
					tk.Done(res)
					workers <- struct{}{}
				})
			}
		})
	}
	wg.Wait()
	minGap := map[byte]time.Duration{'a': 100 * ms, 'c': 20 * ms, 'd': 150 * ms}
	for h, hl := range logs {
		if len(hl.starts) != perHost {
			t.Errorf("host %s: %d starts, want %d", h, len(hl.starts), perHost)
		}
		for i := 1; i < len(hl.starts); i++ {
			if gap := hl.starts[i].Sub(hl.starts[i-1]); gap < minGap[h[0]] {
				t.Errorf("host %s: gap %d = %v, want >= %v", h, i, gap, minGap[h[0]])
			}
		}
	}
	if s := g.Stats(); s.Parked != 0 || s.InFlight != 0 {
		t.Errorf("Stats() at the end = %+v, want nothing parked or in flight", s)
	}
}
