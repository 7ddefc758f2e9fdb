package limits

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestMostParallel(t *testing.T) {
	const probe = "probe.invalid"
	tests := []struct {
		name      string
		rules     []*Rule
		unmatched int
		want      int
	}{
		{"no rules, hosts unlimited", nil, 0, 0},
		{"no rules, hosts capped", nil, 16, 16},
		{"catch-all parallelism", []*Rule{{DomainGlob: "*", Parallelism: 3}}, 0, 3},
		{"catch-all delay only is serial", []*Rule{{DomainGlob: "*", Delay: time.Second}}, 0, 1},
		{"catch-all random delay only is serial", []*Rule{{DomainGlob: "*", RandomDelay: time.Second}}, 0, 1},
		{"a narrower rule first, larger", []*Rule{{DomainGlob: "big.example", Parallelism: 8}, {DomainGlob: "*", Parallelism: 2}}, 0, 8},
		{"rules after the catch-all never apply", []*Rule{{DomainGlob: "*", Parallelism: 2}, {DomainGlob: "big.example", Parallelism: 8}}, 0, 2},
		{"no catch-all: unmatched hosts unlimited", []*Rule{{DomainGlob: "slow.example", Delay: time.Second}}, 0, 0},
		{"no catch-all: unmatched hosts capped", []*Rule{{DomainGlob: "slow.example", Parallelism: 32}}, 16, 32},
		{"a rule with no limit at all", []*Rule{{DomainGlob: "free.example"}, {DomainGlob: "*", Parallelism: 1}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, nil, tt.rules...)
			if got := l.MostParallel(probe, tt.unmatched); got != tt.want {
				t.Errorf("MostParallel(%q, %d) = %d, want %d", probe, tt.unmatched, got, tt.want)
			}
		})
	}
}

// PutAfter holds a host until the given time even when the Gate has never
// seen it (a resumed crawl), and a Ticket's NextStart reports the Delay's end.
func TestPutAfterAndNextStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate[req](newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: 2 * time.Second}), 16)
		defer g.Close()
		start := time.Now()
		hold := start.Add(5 * time.Second)
		if err := g.PutAfter(t.Context(), "a.example:80", req{}, hold); err != nil {
			t.Fatalf("PutAfter() error = %v", err)
		}
		if err := g.Put(t.Context(), "b.example:80", req{}); err != nil {
			t.Fatalf("Put() error = %v", err)
		}
		_, tb, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		if !time.Now().Equal(start) {
			t.Errorf("the host without a hold started at +%v, want at once", time.Since(start))
		}
		_, ta, err := g.Get(t.Context())
		if err != nil {
			t.Fatalf("Get() error = %v", err)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Errorf("the held host started at +%v, want +5s", got)
		}
		ta.Sent(time.Now())
		ta.Done(Result{})
		tb.Done(Result{})
		if got, want := ta.NextStart(), hold.Add(2*time.Second); !got.Equal(want) {
			t.Errorf("NextStart() = +%v, want +%v (the start plus the Delay)", got.Sub(start), want.Sub(start))
		}
		// An earlier time than the host's own next start changes nothing.
		if err := g.PutAfter(t.Context(), "a.example:80", req{}, start); err != nil {
			t.Fatalf("PutAfter() error = %v", err)
		}
		if _, tc, err := g.Get(t.Context()); err != nil {
			t.Fatalf("Get() error = %v", err)
		} else {
			if got := time.Since(start); got != 7*time.Second {
				t.Errorf("next start at +%v, want +7s (the Delay after the last)", got)
			}
			tc.Done(Result{})
		}
		var nilTicket *Ticket
		if !nilTicket.NextStart().IsZero() {
			t.Error("nil Ticket's NextStart() is not zero")
		}
	})
}
