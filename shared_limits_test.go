package magpie

import (
	"context"
	"sync"
	"testing"
	"time"
)

// countingShared grants every start and counts asks and releases.
type countingShared struct {
	// mu guards the counters.
	mu        sync.Mutex
	asks      int
	releases  int
	inflight  int
	maxFlight int
	lastPar   int
	lastDelay time.Duration
}

func (s *countingShared) Acquire(_ context.Context, _ string, delay time.Duration, par int) (func(), time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks++
	s.inflight++
	s.maxFlight = max(s.maxFlight, s.inflight)
	s.lastPar, s.lastDelay = par, delay
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.releases++
			s.inflight--
			s.mu.Unlock()
		})
	}, 0, nil
}

func TestSharedLimits(t *testing.T) {
	tests := []struct {
		name     string
		rule     *LimitRule
		wantAsks bool
	}{
		{"rule with a limit", &LimitRule{DomainGlob: "*", Parallelism: 2, Delay: time.Millisecond}, true},
		{"no rule", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t)
			sh := &countingShared{}
			c := NewCollector(SharedLimits(sh), IgnoreRobotsTxt())
			if tt.rule != nil {
				if err := c.Limit(tt.rule); err != nil {
					t.Fatal(err)
				}
			}
			pages := 0
			var mu sync.Mutex
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			c.OnResponse(func(*Response) { mu.Lock(); pages++; mu.Unlock() })
			if err := c.Visit(ts.URL + "/"); err != nil {
				t.Fatalf("Visit(%q) error = %v, want nil", ts.URL+"/", err)
			}
			c.Wait()
			if pages < 7 {
				t.Fatalf("crawl fetched %d pages, want 7", pages)
			}
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if !tt.wantAsks {
				if sh.asks != 0 {
					t.Errorf("Shared asked %d times for a host without a rule, want 0", sh.asks)
				}
				return
			}
			if sh.asks != pages || sh.releases != pages {
				t.Errorf("Shared asked %d times and released %d for %d pages, want one each per page", sh.asks, sh.releases, pages)
			}
			if sh.maxFlight > 2 || sh.lastPar != 2 || sh.lastDelay != time.Millisecond {
				t.Errorf("Shared saw %d in flight, parallelism %d, delay %v; want <= 2, 2, 1ms", sh.maxFlight, sh.lastPar, sh.lastDelay)
			}
		})
	}
}
