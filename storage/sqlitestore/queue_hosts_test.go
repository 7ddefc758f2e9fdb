package sqlitestore

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// checkHosts compares queue_hosts with what the queue's entries make it:
// per host, its leased count (entries with a lease, expired or not) and
// its head (the first candidate by rank and seq); a host without entries
// keeps a row only while parked, but the host "".
func checkHosts(t *testing.T, s *Store, step string) {
	t.Helper()
	type state struct {
		leased            int64
		headRank, headSeq *int64
		parked            bool
		entries           bool
	}
	want := map[string]*state{}
	rows, err := s.db.Query(`SELECT h.host, COUNT(lease_until) FROM queue q
		LEFT JOIN queue_hosts h ON h.id = q.host_id GROUP BY q.host_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		st := &state{entries: true}
		var host *string
		if err := rows.Scan(&host, &st.leased); err != nil {
			t.Fatal(err)
		}
		if host == nil {
			t.Fatalf("after %s: entries of a host ID with no row in queue_hosts", step)
		}
		want[*host] = st
	}
	rows.Close()
	rows, err = s.db.Query(`SELECT h.host, rank, MIN(seq) FROM queue q JOIN queue_hosts h ON h.id = q.host_id
		WHERE lease_until IS NULL AND not_before = 0 AND rank = (SELECT MIN(rank) FROM queue
			WHERE host_id = q.host_id AND lease_until IS NULL AND not_before = 0)
		GROUP BY q.host_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var host string
		var rank, seq int64
		if err := rows.Scan(&host, &rank, &seq); err != nil {
			t.Fatal(err)
		}
		want[host].headRank, want[host].headSeq = &rank, &seq
	}
	rows.Close()
	got := map[string]*state{}
	rows, err = s.db.Query(`SELECT host, leased, head_rank, head_seq, parked, id = 0 FROM queue_hosts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		st := &state{}
		var host string
		var zero bool
		if err := rows.Scan(&host, &st.leased, &st.headRank, &st.headSeq, &st.parked, &zero); err != nil {
			t.Fatal(err)
		}
		if zero != (host == "") {
			t.Fatalf("after %s: host %q has the ID 0: %v; want 0 for the host \"\" only", step, host, zero)
		}
		got[host] = st
	}
	rows.Close()
	show := func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	for host, w := range want {
		g := got[host]
		switch {
		case g == nil:
			t.Fatalf("after %s: host %q has entries and no row in queue_hosts", step, host)
		case g.leased != w.leased:
			t.Fatalf("after %s: host %q leased = %d, want %d", step, host, g.leased, w.leased)
		case show(g.headRank) != show(w.headRank) || show(g.headSeq) != show(w.headSeq):
			t.Fatalf("after %s: host %q head = (%s, %s), want (%s, %s)", step, host,
				show(g.headRank), show(g.headSeq), show(w.headRank), show(w.headSeq))
		}
	}
	for host, g := range got {
		if want[host] == nil && (!g.parked && host != "" || g.leased != 0 || g.headSeq != nil) {
			t.Fatalf("after %s: host %q has no entries and a row %+v that is not parked and empty", step, host, *g)
		}
	}
}

// TestHostBookRandom runs random sequences of every queue operation, with
// leases expiring, entries delayed and hosts parked along a clock that
// moves on, and checks after each that queue_hosts is what the entries
// make it.
func TestHostBookRandom(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			randomHostOps(t, seed, 250)
		})
	}
}

func randomHostOps(t *testing.T, seed uint64, steps int) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(seed, 39))
	path := filepath.Join(t.TempDir(), "random.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hosts := []string{"", "a.example", "b.example:8080", "c.example"}
	now := time.Now()
	var held []string
	pick := func() string { return held[r.IntN(len(held))] }
	// A ttl of a nanosecond has expired by the next plain Lease, which
	// takes the entry over.
	ttl := func() time.Duration {
		if r.IntN(3) == 0 {
			return time.Nanosecond
		}
		return time.Duration(1+r.IntN(3)) * time.Minute
	}
	entry := 0
	for step := range steps {
		var op string
		switch k := r.IntN(14); {
		case k == 0:
			op = "Push"
			entry++
			err = s.Push(ctx, []byte(fmt.Sprint("p", entry)), []byte(fmt.Sprint("q", entry)))
		case k <= 2:
			op = "PushHosted"
			var es []storage.HostEntry
			for range 1 + r.IntN(4) {
				entry++
				es = append(es, storage.HostEntry{Host: hosts[r.IntN(len(hosts))], Priority: r.IntN(5) - 2, Data: []byte(fmt.Sprint("h", entry))})
			}
			err = s.PushHosted(ctx, es...)
		case k == 3:
			op = "Lease"
			var es []storage.Entry
			if es, err = s.Lease(ctx, 1+r.IntN(3), ttl()); err == nil {
				for _, e := range es {
					held = append(held, e.ID)
				}
			}
		case k <= 5:
			op = "LeaseHosts"
			var es []storage.Entry
			if es, err = s.LeaseHosts(ctx, now, 1+r.IntN(5), r.IntN(3), time.Duration(1+r.IntN(3))*time.Minute); err == nil {
				for _, e := range es {
					held = append(held, e.ID)
				}
			}
		case k == 6 && len(held) > 0:
			op = "Ack"
			err = s.Ack(ctx, pick(), pick())
		case k == 7 && len(held) > 0:
			op = "Release"
			nb := time.Time{}
			if r.IntN(2) == 0 {
				nb = now.Add(time.Duration(r.IntN(3)) * time.Minute)
			}
			err = s.Release(ctx, pick(), nb)
		case k == 8 && len(held) > 0:
			op = "ReleaseBatch"
			err = s.ReleaseBatch(ctx, time.Time{}, pick(), pick())
		case k == 9 && len(held) > 0:
			op = "Renew"
			err = s.Renew(ctx, ttl(), pick())
		case k == 10:
			op = "SetHostReady"
			err = s.SetHostReady(ctx, map[string]time.Time{
				hosts[r.IntN(len(hosts))]: now.Add(time.Duration(r.IntN(4)-1) * time.Minute),
				"idle.example":            now.Add(time.Duration(r.IntN(3)) * time.Minute),
			})
		case k == 11:
			op = "Head"
			_, err = s.Head(ctx, 1+r.IntN(6))
		case k == 13 && len(held) > 2:
			op = "Ack of many"
			err = s.Ack(ctx, held...)
		case k == 12 && r.IntN(4) == 0:
			op = "reopen"
			if err = s.Close(); err == nil {
				s, err = Open(path)
			}
			held = held[:0]
		default:
			op = "clock"
			now = now.Add(time.Duration(r.IntN(90)) * time.Second)
		}
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) && !errors.Is(err, storage.ErrUnknownLease) {
			t.Fatalf("step %d %s error = %v", step, op, err)
		}
		checkHosts(t, s, fmt.Sprintf("step %d %s", step, op))
	}
}

// TestLeaseHostsPerHostAcrossStores: two Stores on one file (two
// processes) see each other's leases in a host's count.
func TestLeaseHostsPerHostAcrossStores(t *testing.T) {
	ctx := t.Context()
	s1, path := openTest(t)
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	if err := s1.PushHosted(ctx, storage.HostEntry{Host: "h", Data: []byte("h1")},
		storage.HostEntry{Host: "h", Data: []byte("h2")}, storage.HostEntry{Host: "k", Data: []byte("k1")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got, err := s1.LeaseHosts(ctx, now, 1, 1, time.Hour)
	if err != nil || len(got) != 1 || string(got[0].Data) != "h1" {
		t.Fatalf("LeaseHosts on the first Store = %v, %v; want h1", got, err)
	}
	got, err = s2.LeaseHosts(ctx, now, 10, 1, time.Hour)
	if err != nil || len(got) != 1 || string(got[0].Data) != "k1" {
		t.Fatalf("LeaseHosts(perHost 1) on the second Store = %v, %v; want only k1 (h holds a lease of the first)", got, err)
	}
}

// TestLeaseHostsExpiredLeaseAck: a lease that expired frees its host's slot
// at once, and its holder can still acknowledge it until another consumer
// leases the entry; the count stays right either way.
func TestLeaseHostsExpiredLeaseAck(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t)
	if err := s.PushHosted(ctx, storage.HostEntry{Host: "h", Data: []byte("h1")},
		storage.HostEntry{Host: "h", Data: []byte("h2")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	first, err := s.LeaseHosts(ctx, now, 1, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseHosts(ctx, now.Add(30*time.Second), 1, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("LeaseHosts(perHost 1) while h1's lease runs error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	// Past the lease: the sweep makes h1 a candidate again, first in its
	// host's order; h is held back by its ready time, so nobody takes it.
	if err := s.SetHostReady(ctx, map[string]time.Time{"h": now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseHosts(ctx, now.Add(2*time.Minute), 1, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("LeaseHosts before h is ready error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	checkHosts(t, s, "the sweep")
	if err := s.Ack(ctx, first[0].ID); err != nil {
		t.Fatalf("Ack(expired lease not taken over) error = %v, want nil", err)
	}
	checkHosts(t, s, "the Ack")
	got, err := s.LeaseHosts(ctx, now.Add(2*time.Hour), 10, 1, time.Minute)
	if err != nil || len(got) != 1 || string(got[0].Data) != "h2" {
		t.Fatalf("LeaseHosts(perHost 1) after the Ack = %v, %v; want h2", got, err)
	}
}

// writeV3 writes a file of schema version 3 (the release before HostQueue),
// with the DDL of its migrations, then runs stmts on it.
func writeV3(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range append([]string{migrations[0], migrations[1], migrations[2], "PRAGMA user_version = 3"}, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("building the version 3 file: %q: %v", q, err)
		}
	}
}

// TestMigrateV3HostQueue opens a queue written by schema version 3, with
// entries ready, leased (by a Store that is not coming back), leased with
// the lease expired, and delayed: they become entries of host "" with the
// priority 0, and LeaseHosts, Lease and the host's leased count work on
// them.
func TestMigrateV3HostQueue(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v3.db")
	now := time.Now()
	future, past := now.Add(time.Hour).UnixNano(), now.Add(-time.Minute).UnixNano()
	writeV3(t, path,
		"INSERT INTO queue (data) VALUES ('a'), ('b'), ('c'), ('d'), ('e'), ('f')",
		fmt.Sprintf("UPDATE queue SET lease_until = %d, lease_token = 7, lease_owner = 99, deliveries = 1 WHERE data = 'a'", future),
		fmt.Sprintf("UPDATE queue SET lease_until = %d, lease_token = 8, lease_owner = 99, deliveries = 1 WHERE data = 'c'", past),
		fmt.Sprintf("UPDATE queue SET not_before = %d WHERE data = 'd'", future),
		"INSERT INTO visited (id) VALUES (42)")

	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(version 3 file) error = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version after Open = %d, %v; want %d", v, err, schemaVersion)
	}
	checkHosts(t, s, "the migration")
	if ok, err := s.IsVisited(42); err != nil || !ok {
		t.Errorf("IsVisited(42) after the migration = %v, %v; want true", ok, err)
	}
	if l, err := s.Len(ctx); err != nil || l != (storage.QueueLen{Ready: 4, Delayed: 1, Leased: 1}) {
		t.Errorf("Len() after the migration = %+v, %v; want 4 ready, 1 delayed, 1 leased", l, err)
	}
	// a is leased; host "" (entries from before hosts) has no per-host
	// limit, so a limit of 3 still gives b, c (whose lease expired), e and
	// f, in push order; d waits for its not-before time.
	got, err := s.LeaseHosts(ctx, now, 10, 3, time.Hour)
	if err != nil {
		t.Fatalf("LeaseHosts(perHost 3) after the migration error = %v", err)
	}
	var datas []string
	for _, e := range got {
		datas = append(datas, string(e.Data))
		if e.Host != "" || e.Priority != 0 || !e.HostReady.IsZero() {
			t.Errorf("entry %q: Host, Priority, HostReady = %q, %d, %v; want \"\", 0, zero", e.Data, e.Host, e.Priority, e.HostReady)
		}
	}
	if !slices.Equal(datas, []string{"b", "c", "e", "f"}) {
		t.Errorf("LeaseHosts(perHost 3) after the migration = %q, want [b c e f]", datas)
	}
	if _, err := s.LeaseHosts(ctx, now, 10, 3, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Errorf("LeaseHosts(perHost 3) with everything leased error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	if _, err := s.Lease(ctx, 10, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Errorf("Lease(10) with everything leased error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	checkHosts(t, s, "the leases")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after the migration error = %v", err)
	}
	s2.Close()
}

// TestMigrateV3Atomic: a migration that fails leaves the file as it was
// (one transaction), so the release that wrote it can still open it.
func TestMigrateV3Atomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	// A table in the way of the migration's.
	writeV3(t, path, "INSERT INTO queue (data) VALUES ('a')", "CREATE TABLE queue_hosts (x)")
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("Open(version 3 file with a queue_hosts table) error = nil, want the migration's")
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, cols int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 3 {
		t.Errorf("user_version after a failed migration = %d, %v; want 3", v, err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM pragma_table_info('queue') WHERE name IN ('host', 'rank')").Scan(&cols); err != nil || cols != 0 {
		t.Errorf("queue's host and rank columns after a failed migration = %d, %v; want none", cols, err)
	}
}

// TestHelperHostReady is the child process of TestHostReadyCrash: it pushes
// entries of host h, leases one, sets h's next start to MAGPIE_HOST_READY
// (Unix nanoseconds), says so on stdout and waits to be killed. It does
// nothing in a normal test run.
func TestHelperHostReady(t *testing.T) {
	dbPath, at := os.Getenv("MAGPIE_HOST_DB"), os.Getenv("MAGPIE_HOST_READY")
	if dbPath == "" || at == "" {
		t.Skip("helper process for TestHostReadyCrash")
	}
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.PushHosted(ctx, storage.HostEntry{Host: "h", Priority: 3, Data: []byte("h1")},
		storage.HostEntry{Host: "h", Data: []byte("h2")}, storage.HostEntry{Host: "k", Data: []byte("k1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseHosts(ctx, time.Now(), 1, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHostReady(ctx, map[string]time.Time{"h": time.Unix(0, ns)}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
}

// TestHostReadyCrash: a process killed with SIGKILL after setting a host's
// next start leaves it in the file, so a resumed crawl does not burst the
// host; the entry it held comes back to its host in its place.
func TestHostReadyCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	ready := time.Now().Add(time.Hour)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHostReady$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MAGPIE_HOST_DB="+path, fmt.Sprint("MAGPIE_HOST_READY=", ready.UnixNano()))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q, %v; want ready", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed

	s, err := Open(path) // the helper's process is gone: its lease comes back
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	got, err := s.LeaseHosts(ctx, time.Now(), 10, 0, time.Hour)
	if err != nil || len(got) != 1 || string(got[0].Data) != "k1" {
		t.Fatalf("LeaseHosts(now) after the crash = %v, %v; want only k1 (h is not ready for an hour)", got, err)
	}
	head, err := s.Head(ctx, 10)
	if err != nil || len(head) != 2 || !head[0].HostReady.Equal(time.Unix(0, ready.UnixNano())) {
		t.Fatalf("Head() after the crash = %+v, %v; want h's 2 entries, ready at %v", head, err, ready)
	}
	got, err = s.LeaseHosts(ctx, ready, 10, 0, time.Hour)
	if err != nil || len(got) != 2 || string(got[0].Data) != "h1" || got[0].Deliveries != 2 || string(got[1].Data) != "h2" {
		t.Fatalf("LeaseHosts(at h's ready time) = %v, %v; want h1 (leased at the crash, delivered twice), then h2", got, err)
	}
}

// hostStateBytes is the file space queue_hosts and its indexes take, and
// the queue's host index, in bytes, from SQLite's dbstat.
func hostStateBytes(t *testing.T, s *Store) (hosts, hostIndex int64) {
	t.Helper()
	err := s.db.QueryRow(`SELECT
		COALESCE(SUM(CASE WHEN name IN ('queue_hosts', 'sqlite_autoindex_queue_hosts_1', 'queue_hosts_order',
			'queue_hosts_parked') THEN pgsize END), 0),
		COALESCE(SUM(CASE WHEN name = 'queue_host_rank' THEN pgsize END), 0)
		FROM dbstat`).Scan(&hosts, &hostIndex)
	if err != nil {
		t.Fatal(err)
	}
	return hosts, hostIndex
}

// TestHostStateBytes measures what the hosts' state costs with 10,000
// hosts (an entry each, half of them waiting for their ready time), and
// checks that it is gone once their entries are acknowledged and their
// ready times passed: the state is linear in the hosts with work.
func TestHostStateBytes(t *testing.T) {
	const n = 10_000
	ctx := t.Context()
	s, _ := openTest(t)
	emptyHosts, emptyIndex := hostStateBytes(t, s)
	now := time.Now()
	es := make([]storage.HostEntry, n)
	ready := make(map[string]time.Time, n/2)
	for i := range es {
		es[i] = storage.HostEntry{Host: fmt.Sprintf("www.host-%05d.example.com", i), Priority: i % 3, Data: make([]byte, 200)}
		if i%2 == 0 {
			ready[es[i].Host] = now.Add(time.Hour)
		}
	}
	if err := s.PushHosted(ctx, es...); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHostReady(ctx, ready); err != nil {
		t.Fatal(err)
	}
	hosts, index := hostStateBytes(t, s)
	perHost, perEntry := float64(hosts-emptyHosts)/n, float64(index-emptyIndex)/n
	t.Logf("%d hosts of 25 bytes: queue_hosts and its indexes %.0f bytes per host; the queue's host index %.0f bytes per entry", n, perHost, perEntry)
	if perHost > 160 {
		t.Errorf("hosts' state = %.0f bytes per host, want at most 160", perHost)
	}
	for {
		got, err := s.Lease(ctx, 1000, time.Hour)
		if errors.Is(err, storage.ErrQueueEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(got))
		for i, e := range got {
			ids[i] = e.ID
		}
		if err := s.Ack(ctx, ids...); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM queue_hosts").Scan(&rows); err != nil || rows != n/2 {
		t.Errorf("queue_hosts rows with every entry acknowledged = %d, %v; want %d (the hosts whose ready time is to come)", rows, err, n/2)
	}
	if _, err := s.LeaseHosts(ctx, now.Add(2*time.Hour), 1, 0, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("LeaseHosts(past every ready time) of an empty queue error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	if err := s.db.QueryRow("SELECT COUNT(*) FROM queue_hosts").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("queue_hosts rows with no entries and every ready time past = %d, %v; want 0", rows, err)
	}
}

// TestPushUnvisitedHosted: the links of a page, checked against the visited
// set and pushed under their hosts and priorities in one transaction.
func TestPushUnvisitedHosted(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t)
	if _, err := s.AddVisited(ctx, 2); err != nil {
		t.Fatal(err)
	}
	entries := []storage.HostEntry{
		{Host: "a", Priority: 1, Data: []byte("a1")},
		{Host: "b", Priority: 5, Data: []byte("b1")},
		{Host: "a", Priority: 7, Data: []byte("a2")},
	}
	if _, err := s.PushUnvisitedHosted(ctx, []uint64{1, 2}, entries); !errors.Is(err, storage.ErrLengthMismatch) {
		t.Errorf("PushUnvisitedHosted(2 keys, 3 entries) error = %v, want %v", err, storage.ErrLengthMismatch)
	}
	bad := append(slices.Clone(entries), storage.HostEntry{Host: "c", Priority: math.MaxInt32 + 1, Data: []byte("c1")})
	if _, err := s.PushUnvisitedHosted(ctx, []uint64{1, 2, 3, 4}, bad); !errors.Is(err, storage.ErrPriorityRange) {
		t.Errorf("PushUnvisitedHosted(priority 2^31) error = %v, want %v", err, storage.ErrPriorityRange)
	}
	pushed, err := s.PushUnvisitedHosted(ctx, []uint64{1, 2, 3}, entries)
	if err != nil || !slices.Equal(pushed, []bool{true, false, true}) {
		t.Fatalf("PushUnvisitedHosted() = %v, %v; want [true false true] (key 2 is visited)", pushed, err)
	}
	got, err := s.LeaseHosts(ctx, time.Now(), 10, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var desc []string
	for _, e := range got {
		desc = append(desc, fmt.Sprintf("%s:%d:%s", e.Host, e.Priority, e.Data))
	}
	if want := []string{"a:7:a2", "a:1:a1"}; !slices.Equal(desc, want) {
		t.Errorf("LeaseHosts() after PushUnvisitedHosted = %q, want %q", desc, want)
	}
	checkHosts(t, s, "PushUnvisitedHosted")
}

// TestPushHostedMaxSize: with WithMaxSize, a PushHosted or
// PushUnvisitedHosted that does not fit pushes nothing.
func TestPushHostedMaxSize(t *testing.T) {
	ctx := t.Context()
	s, _ := openTest(t, WithMaxSize(3))
	es := []storage.HostEntry{{Host: "a", Data: []byte("a1")}, {Host: "b", Data: []byte("b1")}}
	if err := s.PushHosted(ctx, es...); err != nil {
		t.Fatal(err)
	}
	if err := s.PushHosted(ctx, es...); !errors.Is(err, storage.ErrQueueFull) {
		t.Errorf("PushHosted(2) into 2 of 3 error = %v, want %v", err, storage.ErrQueueFull)
	}
	if _, err := s.PushUnvisitedHosted(ctx, []uint64{1, 2}, es); !errors.Is(err, storage.ErrQueueFull) {
		t.Errorf("PushUnvisitedHosted(2) into 2 of 3 error = %v, want %v", err, storage.ErrQueueFull)
	}
	if l, err := s.Len(ctx); err != nil || l.Total() != 2 {
		t.Errorf("Len() after the pushes that did not fit = %+v, %v; want 2 entries", l, err)
	}
	checkHosts(t, s, "the pushes that did not fit")
}
