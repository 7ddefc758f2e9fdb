package magpie

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// spacingNotes returns the records that name DelayPerSlot.
func (h *recordHandler) spacingNotes() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.recs {
		if strings.Contains(r.Message, "DelayPerSlot") {
			out = append(out, r)
		}
	}
	return out
}

// TestLimitNotesStartSpacing: a rule with Parallelism above 1 and a Delay
// (which spaces starts, so never reaches that Parallelism with fast
// responses) is noted once per collector and rule, naming DelayPerSlot;
// rules that do reach their Parallelism are not.
func TestLimitNotesStartSpacing(t *testing.T) {
	tests := []struct {
		name string
		rule *LimitRule
		want int
	}{
		{"Parallelism and Delay", &LimitRule{DomainGlob: "*", Parallelism: 4, Delay: time.Second}, 1},
		{"Parallelism and RandomDelay", &LimitRule{DomainGlob: "*", Parallelism: 2, RandomDelay: time.Second}, 1},
		{"DelayPerSlot", &LimitRule{DomainGlob: "*", Parallelism: 4, Delay: time.Second, DelayPerSlot: true}, 0},
		{"Parallelism 1", &LimitRule{DomainGlob: "*", Parallelism: 1, Delay: time.Second}, 0},
		{"no Delay", &LimitRule{DomainGlob: "*", Parallelism: 4}, 0},
		{"AutoThrottle", &LimitRule{DomainGlob: "*", Parallelism: 4, Delay: time.Second, AutoThrottle: &limits.AutoThrottle{}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &recordHandler{}
			c := NewCollector(Logger(slog.New(h)))
			for range 2 {
				if err := c.Limit(tt.rule); err != nil {
					t.Fatalf("Limit(%s) error = %v", tt.name, err)
				}
			}
			notes := h.spacingNotes()
			if len(notes) != tt.want {
				t.Fatalf("records naming DelayPerSlot after adding the rule twice = %d, want %d", len(notes), tt.want)
			}
			if tt.want == 0 {
				return
			}
			r := notes[0]
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if r.Level != slog.LevelInfo || attrs["domain_glob"] != "*" || attrs["parallelism"] != slog.IntValue(tt.rule.Parallelism).String() {
				t.Errorf("note = %v %q %v, want Info with the rule's glob and parallelism", r.Level, r.Message, attrs)
			}
		})
	}
	// Limits notes each rule once; another collector notes its own.
	h := &recordHandler{}
	a := &LimitRule{DomainGlob: "a.test", Parallelism: 2, Delay: time.Second}
	b := &LimitRule{DomainGlob: "b.test", Parallelism: 3, Delay: time.Second}
	c := NewCollector(Logger(slog.New(h)))
	if err := c.Limits([]*LimitRule{a, b, a}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.spacingNotes()); n != 2 {
		t.Errorf("Limits(a, b, a) notes = %d, want 2", n)
	}
	if err := NewCollector(Logger(slog.New(h))).Limit(a); err != nil {
		t.Fatal(err)
	}
	if n := len(h.spacingNotes()); n != 3 {
		t.Errorf("notes after a second collector added a = %d, want 3", n)
	}
}
