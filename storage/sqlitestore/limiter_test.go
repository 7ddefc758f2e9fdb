package sqlitestore

import (
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// openPair opens two Stores on one file, as two processes would.
func openPair(t *testing.T) (*Store, *Store) {
	t.Helper()
	s, path := openTest(t)
	other, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) second Store error = %v", path, err)
	}
	t.Cleanup(func() { other.Close() })
	return s, other
}

func TestHostLimiterDelay(t *testing.T) {
	ctx := t.Context()
	s, other := openPair(t)
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
		{"same host from another Store", h2, "a.test", delay, 0, false},
		{"same host, same Store", h, "a.test", delay, 1, false},
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
	if d, err := h2.Allow(ctx, "d.test", 0); err != nil || d != 0 {
		t.Errorf("Allow(d.test, 0) = %v, %v, want 0, nil", d, err)
	}
}

func TestHostLimiterParallelism(t *testing.T) {
	ctx := t.Context()
	s, other := openPair(t)
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

// TestHostLimiterConcurrent hammers one host from two Stores on one file,
// three goroutines each, and checks the grants exactly: with a delay, every
// two grant times (on the clock read under the file's lock) are at least the
// delay apart; with a parallelism, never more slots are held than it allows.
func TestHostLimiterConcurrent(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
		par   int
		hold  time.Duration // how long a granted request runs
	}{
		{"delay", 5 * time.Millisecond, 0, 0},
		{"parallelism", 0, 2, time.Millisecond},
		{"both", 3 * time.Millisecond, 1, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, other := openPair(t)
			const want = 40
			var (
				mu     sync.Mutex
				grants []time.Time
				held   atomic.Int32
				most   atomic.Int32
				total  atomic.Int32
				wg     sync.WaitGroup
			)
			errs := make(chan error, 6)
			for _, st := range []*Store{s, other} {
				h := st.HostLimiter(time.Minute)
				h.OnGrant(func(_ string, at time.Time) {
					mu.Lock()
					grants = append(grants, at)
					mu.Unlock()
				})
				for range 3 {
					wg.Go(func() {
						for total.Load() < want {
							r, wait, err := h.Acquire(t.Context(), "a.test", tt.delay, tt.par)
							if err != nil {
								errs <- err
								return
							}
							if r == nil {
								<-time.After(wait) // real time: the file's clock decides
								continue
							}
							n := held.Add(1)
							for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
							}
							total.Add(1)
							if tt.hold > 0 {
								<-time.After(tt.hold) // the request runs
							}
							// Count the slot free before it is: held never
							// exceeds the slots in the file.
							held.Add(-1)
							r()
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("Acquire error = %v, want nil", err)
			}
			if tt.par > 0 {
				if m := int(most.Load()); m > tt.par {
					t.Errorf("%d slots held at once, want at most %d", m, tt.par)
				}
			}
			slices.SortFunc(grants, time.Time.Compare)
			if len(grants) < want {
				t.Fatalf("%d grants reported by OnGrant, want >= %d", len(grants), want)
			}
			for i := 1; i < len(grants); i++ {
				if gap := grants[i].Sub(grants[i-1]); gap < tt.delay {
					t.Errorf("grants %d and %d %v apart, want >= %v", i-1, i, gap, tt.delay)
				}
			}
			t.Logf("%d grants, most held at once %d", len(grants), most.Load())
		})
	}
}

func TestHostLimiterSlotExpires(t *testing.T) {
	ctx := t.Context()
	s, other := openPair(t)
	const ttl = time.Minute
	clock := time.Now()
	h, h2 := s.HostLimiter(ttl), other.HostLimiter(ttl)
	h.now = func() time.Time { return clock }
	h2.now = func() time.Time { return clock }
	if r, _, err := h.Acquire(ctx, "a.test", 0, 1); err != nil || r == nil {
		t.Fatalf("Acquire = %v, %v, want a grant", r != nil, err)
	} // never released: its process "died"
	steps := []struct {
		advance time.Duration
		want    bool
	}{
		{0, false},
		{ttl - time.Microsecond, false},
		{time.Microsecond, true}, // the lease runs out exactly at the TTL
	}
	var elapsed time.Duration
	for _, st := range steps {
		elapsed += st.advance
		clock = clock.Add(st.advance)
		r, wait, err := h2.Acquire(ctx, "a.test", 0, 1)
		if err != nil {
			t.Fatalf("Acquire error = %v, want nil", err)
		}
		if got := r != nil; got != st.want {
			t.Fatalf("Acquire %v after the first granted = %v (wait %v), want %v", elapsed, got, wait, st.want)
		}
	}
}

func TestHostLimiterClosed(t *testing.T) {
	s, _ := openTest(t)
	h := s.HostLimiter(0)
	r, _, err := h.Acquire(t.Context(), "a.test", 0, 1)
	if err != nil || r == nil {
		t.Fatalf("Acquire = %v, %v, want a grant", r != nil, err)
	}
	s.Close()
	r() // after Close: ignored, no panic
	if _, _, err := h.Acquire(t.Context(), "a.test", time.Second, 1); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Acquire after Close error = %v, want %v", err, storage.ErrClosed)
	}
	if _, err := h.Allow(t.Context(), "a.test", 0); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Allow after Close error = %v, want %v", err, storage.ErrClosed)
	}
}

// TestMigrateV1 opens a file written by schema version 1 and checks it is
// brought to version 2 with its data kept and the host limiter working.
func TestMigrateV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], "PRAGMA user_version = 1",
		"INSERT INTO visited (id) VALUES (42)", "INSERT INTO hosts (host, next_start, in_flight) VALUES ('old.test', 0, 0)"} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("building v1 file: %q: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(v1 file) error = %v", err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version after Open = %d, %v, want %d", v, err, schemaVersion)
	}
	if ok, err := s.IsVisited(42); err != nil || !ok {
		t.Errorf("IsVisited(42) after migration = %v, %v, want true", ok, err)
	}
	var cols int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM pragma_table_info('hosts') WHERE name = 'in_flight'").Scan(&cols); err != nil || cols != 0 {
		t.Errorf("hosts.in_flight columns after migration = %d, %v, want 0", cols, err)
	}
	h := s.HostLimiter(0)
	for i, want := range []bool{true, false} {
		r, _, err := h.Acquire(t.Context(), "old.test", time.Minute, 1)
		if err != nil {
			t.Fatalf("Acquire %d on migrated file error = %v", i, err)
		}
		if got := r != nil; got != want {
			t.Errorf("Acquire %d on migrated file granted = %v, want %v", i, got, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Opening again is a no-op migration.
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after migration error = %v", err)
	}
	s2.Close()
}
