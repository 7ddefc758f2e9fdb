package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestHostLimiterAllow(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, Options{})
	other := newTestStore(t, Options{Prefix: s.prefix}) // a second process
	h, h2 := s.HostLimiter(0), other.HostLimiter(0)
	const delay = 300 * time.Millisecond
	if d, err := h.Allow(ctx, "a.test", delay); err != nil || d != 0 {
		t.Fatalf("first Allow = %v, %v, want 0, nil", d, err)
	}
	d, err := h2.Allow(ctx, "a.test", delay)
	if err != nil || d <= 0 || d > delay {
		t.Fatalf("second Allow from another Store = %v, %v, want a wait in (0, %v]", d, err, delay)
	}
	if d, err := h2.Allow(ctx, "b.test", delay); err != nil || d != 0 {
		t.Fatalf("Allow for another host = %v, %v, want 0, nil", d, err)
	}
	if d, err := h.Allow(ctx, "a.test", 0); err != nil || d != 0 {
		t.Fatalf("Allow with no delay = %v, %v, want 0, nil", d, err)
	}
}

func TestHostLimiterAcquireParallelism(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, Options{})
	other := newTestStore(t, Options{Prefix: s.prefix})
	h, h2 := s.HostLimiter(time.Minute), other.HostLimiter(time.Minute)
	r1, err := h.Acquire(ctx, "a.test", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := h2.Acquire(ctx, "a.test", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := h.Acquire(short, "a.test", 0, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Acquire with 2 slots taken error = %v, want %v", err, context.DeadlineExceeded)
	}
	if r, err := h.Acquire(ctx, "b.test", 0, 2); err != nil {
		t.Fatalf("Acquire for another host error = %v", err)
	} else {
		r()
	}
	got := make(chan error, 1)
	go func() {
		r3, err := h.Acquire(ctx, "a.test", 0, 2)
		if err == nil {
			r3()
		}
		got <- err
	}()
	r2()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire after a release error = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not get the released slot")
	}
	r1()
}

func TestHostLimiterAcquireDelay(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, Options{})
	h := s.HostLimiter(0)
	const delay = 100 * time.Millisecond
	start := time.Now()
	for range 3 {
		r, err := h.Acquire(ctx, "a.test", delay, 1)
		if err != nil {
			t.Fatal(err)
		}
		r()
	}
	if el := time.Since(start); el < 2*delay-10*time.Millisecond {
		t.Fatalf("3 Acquires with delay %v took %v, want at least %v", delay, el, 2*delay)
	}
}
