package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// redisAddr returns the address of the live server the tests use. Without
// one the tests skip locally and fail in CI, where .ci/run starts a server.
func redisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("MAGPIE_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server required in CI: set MAGPIE_REDIS_ADDR")
		}
		t.Skip("MAGPIE_REDIS_ADDR is not set: start redis-server on 127.0.0.1 and export MAGPIE_REDIS_ADDR=127.0.0.1:PORT to run the Redis tests")
	}
	return addr
}

// newTestStore opens a Store on a random prefix of the live server and
// deletes the prefix's keys at cleanup.
func newTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = randomPrefix()
	}
	opts.Addr = redisAddr(t)
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v) error = %v", opts, err)
	}
	t.Cleanup(func() {
		if s.closed.Load() {
			// Reconnect just to clean up after a test that closed its Store.
			c, err := New(opts)
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			s = c
		}
		if err := s.Clear(context.Background()); err != nil {
			t.Errorf("cleanup Clear() error = %v", err)
		}
		s.Close()
	})
	return s
}

func randomPrefix() string { return fmt.Sprintf("magpietest-%x", rand.Uint64()) }

// eventually calls f until it returns true or the deadline passes. Lease
// expiry is measured by the Redis server's clock, which virtual time cannot
// move, so these tests wait for it.
func eventually(t *testing.T, within time.Duration, f func() bool) bool {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !f() {
		select {
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
	return true
}
