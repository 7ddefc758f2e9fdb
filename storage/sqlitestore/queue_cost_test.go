package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"modernc.org/sqlite"
)

// hostedEntries is n entries of host, priority 0, "host-0", "host-1"...
func hostedEntries(host string, n int) []storage.HostEntry {
	es := make([]storage.HostEntry, n)
	for i := range es {
		es[i] = storage.HostEntry{Host: host, Data: fmt.Appendf(nil, "%s-%d", host, i)}
	}
	return es
}

func entryIDs(es []storage.Entry) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

// countHostWrites counts the rows of queue_hosts that SQLite writes on the
// connection of s from now on (its pre-update hook, which a rolled back
// write fires too).
func countHostWrites(t *testing.T, s *Store) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	conn, err := s.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(dc any) error {
		dc.(sqlite.HookRegisterer).RegisterPreUpdateHook(func(d sqlite.SQLitePreUpdateData) {
			if d.TableName == "queue_hosts" {
				n.Add(1)
			}
		})
		return nil
	})
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	return &n
}

// TestQueueCallCost holds the statements that a queue run's steady calls
// cost, each a round through database/sql and SQLite, which bound a
// single-host run over the store: a push of links behind their host's head
// reads the host's row and inserts (no write to the row, no head update),
// an Ack of held leases of a host that keeps entries is one delete per
// chunk and one update of the host (no savepoint, no second look at the
// host), and a LeaseHosts with nothing to sweep that leases fewer than
// asked reads what waits once, before the lease, not again after it.
func TestQueueCallCost(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.PushHosted(ctx, hostedEntries("a.test", 40)...); err != nil {
		t.Fatal(err)
	}
	writes := countHostWrites(t, s)

	before := s.stmts.Load()
	if err := s.PushHosted(ctx, hostedEntries("a.test", 8)...); err != nil {
		t.Fatal(err)
	}
	// The host's row, one INSERT of 8.
	if got := s.stmts.Load() - before; got != 2 {
		t.Errorf("PushHosted of 8 entries behind the head ran %d statements, want 2", got)
	}
	if got := writes.Load(); got != 0 {
		t.Errorf("PushHosted of 8 entries behind the head wrote queue_hosts %d times, want 0", got)
	}

	before = s.stmts.Load()
	es, err := s.LeaseHosts(ctx, time.Now(), 8, 0, time.Minute)
	if err != nil || len(es) != 8 {
		t.Fatalf("LeaseHosts(8) = %d entries, %v", len(es), err)
	}
	// What waits, the hosts, the lease, the new head.
	if got := s.stmts.Load() - before; got != 4 {
		t.Errorf("LeaseHosts of 8 ran %d statements, want 4", got)
	}

	before = s.stmts.Load()
	if err := s.Ack(ctx, entryIDs(es)...); err != nil {
		t.Fatal(err)
	}
	// One DELETE of 8, the host's leased count.
	if got := s.stmts.Load() - before; got != 2 {
		t.Errorf("Ack of 8 held leases ran %d statements, want 2", got)
	}

	// Leasing the rest (40) falls short of 64 and has no sweep: it does
	// not ask again what waits.
	before = s.stmts.Load()
	es, err = s.LeaseHosts(ctx, time.Now(), 64, 0, time.Minute)
	if err != nil || len(es) != 40 {
		t.Fatalf("LeaseHosts(64) = %d entries, %v, want 40", len(es), err)
	}
	if got := s.stmts.Load() - before; got != 4 {
		t.Errorf("LeaseHosts short of n ran %d statements, want 4", got)
	}
}

// TestAckChunkNotHeld acknowledges chunks (64, 32, ..., 1 IDs of one
// lease) that hold IDs not held: acknowledged already, repeated, expired
// and swept back among the candidates (still its holder's to
// acknowledge). A chunk deletes all its entries or none, and then its IDs
// are taken one at a time; the hosts' counts stay right, so that the host
// leases its perHost again and is forgotten once empty.
func TestAckChunkNotHeld(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.PushHosted(ctx, hostedEntries("a.test", 127)...); err != nil {
		t.Fatal(err)
	}
	es, err := s.LeaseHosts(ctx, time.Now(), 127, 0, time.Hour)
	if err != nil || len(es) != 127 {
		t.Fatalf("LeaseHosts(127) = %d entries, %v", len(es), err)
	}
	ids := entryIDs(es)
	// One ID of each chunk but the last acknowledged already.
	var gone []string
	for _, i := range []int{5, 70, 100, 120, 124} {
		gone = append(gone, ids[i])
	}
	if err := s.Ack(ctx, gone...); err != nil {
		t.Fatal(err)
	}
	// With the ID 3 twice: once acknowledged, once not held.
	err = s.Ack(ctx, slices.Concat(ids, []string{ids[3]})...)
	if !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Ack of all error = %v, want %v", err, storage.ErrUnknownLease)
	}
	want := fmt.Sprintf("%q", slices.Concat(gone, []string{ids[3]}))
	slices.Sort(gone)
	if msg := err.Error(); !containsAll(msg, gone...) || countOf(msg, ids[3]) != 1 {
		t.Errorf("Ack of all error = %v, want the IDs %s", err, want)
	}
	if l, err := s.Len(ctx); err != nil || l != (storage.QueueLen{}) {
		t.Fatalf("Len() = %+v, %v, want empty", l, err)
	}
	if n := hostRows(t, s); n != 0 {
		t.Errorf("queue_hosts has %d rows once the host is empty, want 0", n)
	}

	// Expired leases swept back: a chunk of them deletes nothing, and one
	// at a time each is acknowledged.
	if err := s.PushHosted(ctx, hostedEntries("b.test", 6)...); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	es, err = s.LeaseHosts(ctx, past, 6, 0, time.Minute)
	if err != nil || len(es) != 6 {
		t.Fatalf("LeaseHosts(6) an hour ago = %d entries, %v", len(es), err)
	}
	if _, err := s.Head(ctx, 10); err != nil { // sweeps the expired leases
		t.Fatal(err)
	}
	if err := s.Ack(ctx, entryIDs(es[:4])...); err != nil {
		t.Fatalf("Ack of 4 swept leases error = %v", err)
	}
	if err := s.PushHosted(ctx, hostedEntries("b.test", 3)...); err != nil {
		t.Fatal(err)
	}
	// b.test holds no lease: perHost 3 gives 3 of its 5 entries, the two
	// left of the first lease first.
	got, err := s.LeaseHosts(ctx, time.Now(), 10, 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, e := range got {
		data = append(data, string(e.Data))
	}
	if fmt.Sprint(data) != "[b.test-4 b.test-5 b.test-0]" {
		t.Errorf("LeaseHosts(perHost 3) = %q, want [b.test-4 b.test-5 b.test-0]", data)
	}
}

// hostRows counts the rows of queue_hosts.
func hostRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM queue_hosts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if countOf(s, sub) == 0 {
			return false
		}
	}
	return true
}

func countOf(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}

// TestLeaseHostsShortNotify: a LeaseHosts that hands out fewer entries
// than asked, with nothing to sweep, still wakes Notify when the next
// entry may become ready: its own leases' end, or a parked host's ready
// time when that comes first, or a delayed entry's.
func TestLeaseHostsShortNotify(t *testing.T) {
	for _, c := range []struct {
		name string
		// setup runs before the lease; the lease's ttl is a minute.
		setup func(t *testing.T, s *Store)
		want  time.Duration
	}{
		{"lease end", func(t *testing.T, s *Store) {}, time.Minute},
		{"host ready first", func(t *testing.T, s *Store) {
			ready := map[string]time.Time{"parked.test": time.Now().Add(20 * time.Second)}
			if err := s.SetHostReady(context.Background(), ready); err != nil {
				t.Fatal(err)
			}
			if err := s.PushHosted(context.Background(), hostedEntries("parked.test", 1)...); err != nil {
				t.Fatal(err)
			}
		}, 20 * time.Second},
		{"delayed entry first", func(t *testing.T, s *Store) {
			ctx := context.Background()
			if err := s.PushHosted(ctx, hostedEntries("later.test", 1)...); err != nil {
				t.Fatal(err)
			}
			es, err := s.LeaseHosts(ctx, time.Now(), 1, 0, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx, es[0].ID, time.Now().Add(30*time.Second)); err != nil {
				t.Fatal(err)
			}
		}, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				s, _ := openTest(t)
				c.setup(t, s)
				if err := s.PushHosted(ctx, hostedEntries("a.test", 2)...); err != nil {
					t.Fatal(err)
				}
				es, err := s.LeaseHosts(ctx, time.Now(), 5, 0, time.Minute)
				if err != nil || len(es) != 2 {
					t.Fatalf("LeaseHosts(5) = %d entries, %v, want 2", len(es), err)
				}
				drain(s.Notify())
				start := time.Now()
				<-s.Notify()
				if waited := time.Since(start); waited != c.want {
					t.Fatalf("Notify fired after %v, want %v", waited, c.want)
				}
			})
		})
	}
}

// TestLeaseHostsCostBroad holds what a broad crawl's lease costs: the
// hosts full (holding perHost leased entries) are passed over within one
// read of the hosts, the shares of one or two entries of many hosts are
// leased in one statement, and an Ack of the entries of several leases is
// one chunk.
func TestLeaseHostsCostBroad(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	// 100 hosts, leased to their perHost 2: full.
	for i := range 100 {
		if err := s.PushHosted(ctx, hostedEntries(fmt.Sprintf("full%03d.test", i), 3)...); err != nil {
			t.Fatal(err)
		}
	}
	if es, err := s.LeaseHosts(ctx, time.Now(), 200, 2, time.Minute); err != nil || len(es) != 200 {
		t.Fatalf("LeaseHosts(200, perHost 2) = %d entries, %v", len(es), err)
	}
	// 10 hosts after them, with a share of 2 each.
	for i := range 10 {
		if err := s.PushHosted(ctx, hostedEntries(fmt.Sprintf("free%d.test", i), 3)...); err != nil {
			t.Fatal(err)
		}
	}
	before := s.stmts.Load()
	es, err := s.LeaseHosts(ctx, time.Now(), 20, 2, time.Minute)
	if err != nil || len(es) != 20 {
		t.Fatalf("LeaseHosts(20, perHost 2) = %d entries, %v, want 20", len(es), err)
	}
	// What waits, the hosts, one lease for the 10, their heads.
	if got := s.stmts.Load() - before; got != 4 {
		t.Errorf("LeaseHosts of 2 entries of 10 hosts past 100 full hosts ran %d statements, want 4", got)
	}
	var ids []string
	for _, e := range es {
		if e.Host == "free0.test" {
			ids = append(ids, e.ID)
		}
	}
	// free0.test's third entry, with a lease of its own.
	if err := s.Ack(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	third, err := s.LeaseHosts(ctx, time.Now(), 1, 2, time.Minute)
	if err != nil || len(third) != 1 || string(third[0].Data) != "free0.test-2" {
		t.Fatalf("LeaseHosts(1, perHost 2) = %v, %v, want free0.test-2", third, err)
	}
	ids = append(ids[1:], third[0].ID)
	for _, e := range es {
		if e.Host == "free1.test" {
			ids = append(ids, e.ID)
		}
	}
	before = s.stmts.Load()
	if err := s.Ack(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	// One DELETE of the 4 of two leases; the hosts' leased counts (one
	// statement for both), and the empty free0.test forgotten.
	if got := s.stmts.Load() - before; got != 3 {
		t.Errorf("Ack of 4 entries of 2 leases and 2 hosts ran %d statements, want 3", got)
	}
}

// TestLeaseHostsTwoPerHost: the shares of two entries of many hosts,
// leased together, are each host's first two candidates in its lease order
// (highest priority first, the second one of a lower priority too), and
// the hosts' counts and heads move on as they would one host at a time.
func TestLeaseHostsTwoPerHost(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for i := range 5 {
		host := fmt.Sprintf("h%d.test", i)
		err := s.PushHosted(ctx,
			storage.HostEntry{Host: host, Data: []byte(host + "-a")},
			storage.HostEntry{Host: host, Priority: 5, Data: []byte(host + "-b")},
			storage.HostEntry{Host: host, Data: []byte(host + "-c")},
			storage.HostEntry{Host: host, Data: []byte(host + "-d")})
		if err != nil {
			t.Fatal(err)
		}
	}
	lease := func(want string) []storage.Entry {
		t.Helper()
		es, err := s.LeaseHosts(ctx, time.Now(), 100, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, string(e.Data))
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("LeaseHosts(perHost 2) = %v, want %v", got, want)
		}
		return es
	}
	first := lease("[h0.test-b h0.test-a h1.test-b h1.test-a h2.test-b h2.test-a h3.test-b h3.test-a h4.test-b h4.test-a]")
	if _, err := s.LeaseHosts(ctx, time.Now(), 100, 2, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("LeaseHosts with every host full error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	// One of each host's leases back: a share of 1, the head.
	var ids []string
	for i := 0; i < len(first); i += 2 {
		ids = append(ids, first[i].ID)
	}
	if err := s.Ack(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	lease("[h0.test-c h1.test-c h2.test-c h3.test-c h4.test-c]")
	if err := s.Ack(ctx, entryIDs(first)[1:2]...); err != nil {
		t.Fatal(err)
	}
	// h0.test's share is 1 again: its last entry.
	lease("[h0.test-d]")
}

// TestSweepOnlyDue: a LeaseHosts whose sweep has only hosts' ready times
// to apply (a broad crawl's, nearly every lease) runs the statements of
// those alone, not those of leases ending or not-before times.
func TestSweepOnlyDue(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := time.Now()
	if err := s.SetHostReady(ctx, map[string]time.Time{"p.test": now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PushHosted(ctx, hostedEntries("p.test", 1)...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseHosts(ctx, now, 1, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("LeaseHosts before the host's ready time error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	before := s.stmts.Load()
	es, err := s.LeaseHosts(ctx, now.Add(2*time.Second), 1, 1, time.Minute)
	if err != nil || len(es) != 1 {
		t.Fatalf("LeaseHosts after the host's ready time = %d entries, %v", len(es), err)
	}
	// What waits; forget and unpark the hosts; the hosts, the lease, the
	// new head.
	if got := s.stmts.Load() - before; got != 6 {
		t.Errorf("LeaseHosts sweeping a host's ready time ran %d statements, want 6", got)
	}
}
