package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"modernc.org/sqlite"
)

// TestQueueStatementsNotReprepared runs a queue's steady state (push,
// lease, ack; by host, then plain) with an authorizer on the store's
// connection, which SQLite calls whenever it compiles a statement. The
// queue's statements are prepared at Open; one whose plan reads a bound
// value (LIMIT ?, or a parameter where a partial index has a constant) is
// compiled again at every execution with another value, which made a
// lease cost about twice its work. BEGIN and COMMIT, which database/sql
// runs as text, are not counted. The values that SQLite itself replans
// for (a "col = ?" going to or from 0 or 1) are kept out: the hosts'
// IDs are above 1 (the parked host first.test takes 1) and every entry
// has the priority 0.
func TestQueueStatementsNotReprepared(t *testing.T) {
	for _, phase := range []struct {
		name string
		// round runs push, lease and ack once; each round leases another
		// number of entries than the last, as a run's leases do, and some
		// drain the queue of ready entries.
		round func(t *testing.T, s *Store, i int)
	}{{"LeaseHosts", hostedRound}, {"Lease", plainRound}} {
		t.Run(phase.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "queue.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			compiled, what := countCompiles(t, s)
			// The first rounds create the hosts' rows and run each
			// statement once: a statement prepared at Open, before any
			// value was bound, may be compiled again at its first use.
			for i := range 20 {
				phase.round(t, s, i)
			}
			compiled.Store(0)
			for i := 20; i < 60; i++ {
				phase.round(t, s, i)
			}
			if n := compiled.Load(); n != 0 {
				t.Errorf("%d authorizer calls in 40 rounds of push, lease and ack, the last %v: a prepared statement is compiled again when its values change", n, what.Load())
			}
		})
	}
}

// countCompiles counts the statements other than BEGIN and COMMIT that
// SQLite compiles on the connection of s from now on, and keeps what the
// last one touched.
func countCompiles(t *testing.T, s *Store) (*atomic.Int64, *atomic.Value) {
	t.Helper()
	var compiled atomic.Int64
	var what atomic.Value
	conn, err := s.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(dc any) error {
		return dc.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
			if action != sqlite.AuthTransaction {
				compiled.Add(1)
				what.Store(fmt.Sprintf("action %d on %q %q", action, arg1, arg2))
			}
			return sqlite.AuthorizerOK
		})
	})
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	return &compiled, &what
}

// ackAll acknowledges the entries got.
func ackAll(t *testing.T, s *Store, got []storage.Entry, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if err := s.Ack(context.Background(), ids...); err != nil {
		t.Fatal(err)
	}
}

// hostedRound pushes entries of three hosts and leases some by host. The
// parked host first.test, set up at round 0, takes the ID 1.
func hostedRound(t *testing.T, s *Store, i int) {
	t.Helper()
	ctx := context.Background()
	if i == 0 {
		if err := s.SetHostReady(ctx, map[string]time.Time{"first.test": time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	var entries []storage.HostEntry
	for j := range 12 {
		entries = append(entries, storage.HostEntry{Host: fmt.Sprintf("h%d.test", j%3), Data: fmt.Appendf(nil, "%d-%d", i, j)})
	}
	if err := s.PushHosted(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	got, err := s.LeaseHosts(ctx, time.Now(), 5+i%11, 8+i%3, time.Minute)
	ackAll(t, s, got, err)
}

// plainRound pushes entries with Push and leases some with Lease.
func plainRound(t *testing.T, s *Store, i int) {
	t.Helper()
	ctx := context.Background()
	for j := range 6 {
		if err := s.Push(ctx, fmt.Appendf(nil, "%d-%d", i, j)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Lease(ctx, 2+i%8, time.Minute)
	ackAll(t, s, got, err)
}
