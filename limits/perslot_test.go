package limits

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestDelayPerSlot: with DelayPerSlot each of the Parallelism slots waits
// Delay after its request ends, as Colly does, so Parallelism requests
// overlap; without it the host's starts are Delay apart, so they do not.
func TestDelayPerSlot(t *testing.T) {
	const (
		n   = 12
		par = 4
		lat = 100 * ms
	)
	tests := []struct {
		name        string
		perSlot     bool
		random      time.Duration
		wantMaxHost int
		// wantElapsed bounds the crawl's virtual duration.
		minElapsed, maxElapsed time.Duration
	}{
		// Per slot: 3 rounds of 4, each round latency + Delay after the last.
		{"per slot", true, 0, par, 3*lat + 2*time.Second, 3*lat + 2*time.Second},
		{"per slot, random", true, time.Second, par, 3*lat + 2*time.Second, 3*lat + 4*time.Second},
		// Per host: 12 starts one Delay apart, never two in flight.
		{"per host", false, 0, 1, 11 * time.Second, 11*time.Second + lat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &Rule{DomainGlob: "*", Delay: time.Second, RandomDelay: tt.random, Parallelism: par, DelayPerSlot: tt.perSlot}
				g := NewGate[req](newLimiter(t, nil, r), 64)
				rec := simulate(t, g, reqs(n, "a.com:80"), 16, fixed(lat))
				if got := rec.maxHost["a.com:80"]; got != tt.wantMaxHost {
					t.Errorf("most requests in flight to the host = %d, want %d", got, tt.wantMaxHost)
				}
				if rec.elapsed < tt.minElapsed || rec.elapsed > tt.maxElapsed {
					t.Errorf("crawl took %v, want within [%v, %v]", rec.elapsed, tt.minElapsed, tt.maxElapsed)
				}
				if tt.perSlot {
					// A slot's next start is at least Delay after its end:
					// the host never starts more than par within one
					// latency+Delay window.
					s := rec.starts["a.com:80"]
					for i := par; i < len(s); i++ {
						if gap := s[i].Sub(s[i-par]); gap < lat+time.Second {
							t.Errorf("starts #%d and #%d are %v apart, want >= %v (a slot waits Delay after its request)", i-par, i, gap, lat+time.Second)
						}
					}
				}
			})
		})
	}
}

func TestDelayPerSlotClone(t *testing.T) {
	r := &Rule{DomainGlob: "*", Delay: time.Second, DelayPerSlot: true}
	if !r.Clone().DelayPerSlot {
		t.Errorf("Clone().DelayPerSlot = false, want true")
	}
}
