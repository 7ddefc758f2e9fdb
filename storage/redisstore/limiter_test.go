package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

func TestHostLimiterDelay(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, Options{})
	other := newTestStore(t, Options{Prefix: s.prefix}) // a second process
	h, h2 := s.HostLimiter(0), other.HostLimiter(0)
	const delay = 300 * time.Millisecond
	tests := []struct {
		name      string
		h         *HostLimiter
		host      string
		delay     time.Duration
		par       int
		wantStart bool
	}{
		{"first start", h, "a.test", delay, 0, true},
		{"same host from another process", h2, "a.test", delay, 0, false},
		{"same host, same process", h, "a.test", delay, 1, false},
		{"another host", h2, "b.test", delay, 1, true},
		{"no delay, no parallelism", h, "c.test", 0, 0, true},
		{"negative values mean none", h, "c.test", -time.Second, -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release, wait, err := tt.h.Acquire(ctx, tt.host, tt.delay, tt.par)
			if err != nil {
				t.Fatalf("Acquire(%q) error = %v, want nil", tt.host, err)
			}
			if got := release != nil; got != tt.wantStart {
				t.Fatalf("Acquire(%q) granted = %v (wait %v), want %v", tt.host, got, wait, tt.wantStart)
			}
			if tt.wantStart {
				release()
				if wait != 0 {
					t.Errorf("Acquire(%q) granted with wait %v, want 0", tt.host, wait)
				}
			} else if wait <= 0 || wait > delay {
				t.Errorf("Acquire(%q) wait = %v, want in (0, %v]", tt.host, wait, delay)
			}
		})
	}
	if d, err := h2.Allow(ctx, "a.test", delay); err != nil || d <= 0 {
		t.Errorf("Allow(a.test) right after a start = %v, %v, want a wait", d, err)
	}
}

func TestHostLimiterParallelism(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, Options{})
	other := newTestStore(t, Options{Prefix: s.prefix})
	h, h2 := s.HostLimiter(time.Minute), other.HostLimiter(time.Minute)
	acquire := func(h *HostLimiter) (func(), time.Duration) {
		t.Helper()
		r, wait, err := h.Acquire(ctx, "a.test", 0, 2)
		if err != nil {
			t.Fatalf("Acquire(a.test) error = %v, want nil", err)
		}
		return r, wait
	}
	r1, _ := acquire(h)
	r2, _ := acquire(h2)
	if r1 == nil || r2 == nil {
		t.Fatal("Acquire(a.test) with free slots granted nothing")
	}
	if r, wait := acquire(h); r != nil || wait != DefaultSlotPoll {
		t.Fatalf("third Acquire with 2 slots taken = granted %v, wait %v; want wait %v", r != nil, wait, DefaultSlotPoll)
	}
	r2()
	r2() // a second release is harmless
	r3, _ := acquire(h)
	if r3 == nil {
		t.Fatal("Acquire(a.test) after a release granted nothing")
	}
	if r, _ := acquire(h2); r != nil {
		t.Fatal("Acquire(a.test) granted a slot after a double release freed two")
	}
	r1()
	r3()
}

func TestHostLimiterDelayHolds(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, Options{})
	h := s.HostLimiter(0)
	const delay = 50 * time.Millisecond
	// The grants' times on the server's clock, which decides: a client's
	// clock sees each reply one round trip late, by as much as a loaded
	// machine makes it.
	var starts []time.Time
	h.OnGrant(func(_ string, at time.Time) { starts = append(starts, at) })
	for len(starts) < 4 {
		r, wait, err := h.Acquire(ctx, "a.test", delay, 1)
		if err != nil {
			t.Fatalf("Acquire error = %v, want nil", err)
		}
		if r == nil {
			<-time.After(wait) // real time: the server's clock decides
			continue
		}
		r()
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < delay {
			t.Errorf("gap %d between granted starts = %v on the server's clock, want >= %v", i, gap, delay)
		}
	}
}

func TestHostLimiterSlotExpires(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, Options{})
	h := s.HostLimiter(200 * time.Millisecond)
	if r, _, err := h.Acquire(ctx, "a.test", 0, 1); err != nil || r == nil {
		t.Fatalf("Acquire = %v, %v, want a grant", r != nil, err)
	} // never released: its process "died"
	ok := eventually(t, 5*time.Second, func() bool {
		r, _, err := h.Acquire(ctx, "a.test", 0, 1)
		if err != nil {
			t.Fatalf("Acquire error = %v, want nil", err)
		}
		return r != nil
	})
	if !ok {
		t.Fatal("a slot never released did not come back after its TTL")
	}
}

func TestHostLimiterClosed(t *testing.T) {
	s := newTestStore(t, Options{})
	h := s.HostLimiter(0)
	s.Close()
	if _, _, err := h.Acquire(t.Context(), "a.test", time.Second, 1); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Acquire after Close error = %v, want %v", err, storage.ErrClosed)
	}
}
