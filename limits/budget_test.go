package limits

import (
	"errors"
	"testing"
)

// Issue 39 point 3: a Rule's MaxRequestsPerHost is the budget of the
// hosts the first matching rule matches (0 when that rule sets none), a
// budget below 0 fails Add with ErrNegativeBudget and adds none of the
// rules, and Clone keeps it.
func TestHostBudget(t *testing.T) {
	l := New()
	if l.HasBudgets() || l.HostBudget("a.example") != 0 {
		t.Fatalf("a Limiter without rules: HasBudgets %v, HostBudget %d; want false, 0", l.HasBudgets(), l.HostBudget("a.example"))
	}
	err := l.Add(&Rule{DomainGlob: "*", MaxRequestsPerHost: 9}, &Rule{DomainGlob: "b.example", MaxRequestsPerHost: -1})
	if !errors.Is(err, ErrNegativeBudget) {
		t.Errorf("Add(MaxRequestsPerHost: -1) error = %v, want ErrNegativeBudget", err)
	}
	if len(l.Rules()) != 0 || l.HasBudgets() {
		t.Fatalf("a failed Add added %d rules", len(l.Rules()))
	}
	rules := []*Rule{
		{DomainGlob: "a.example", Delay: 1}, // no budget: shadows the catch-all below
		{DomainGlob: "*.example:8080", MaxRequestsPerHost: 3},
		{DomainRegexp: `^c\.`, MaxRequestsPerHost: 7},
		{DomainGlob: "*", MaxRequestsPerHost: 100},
	}
	if err := l.Add(rules...); err != nil {
		t.Fatal(err)
	}
	if !l.HasBudgets() {
		t.Error("HasBudgets() = false with rules that set one")
	}
	for host, want := range map[string]int{
		"a.example":      0,
		"A.EXAMPLE:80":   0,
		"b.example:8080": 3,
		"c.example":      7,
		"c.example:8080": 3,
		"d.test":         100,
		"":               0,
	} {
		if got := l.HostBudget(host); got != want {
			t.Errorf("HostBudget(%q) = %d, want %d", host, got, want)
		}
	}
	if n := rules[2].Clone(); n.MaxRequestsPerHost != 7 {
		t.Errorf("Clone().MaxRequestsPerHost = %d, want 7", n.MaxRequestsPerHost)
	}
}
