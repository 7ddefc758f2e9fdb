package sqlitestore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// checkHosts compares queue_hosts with what the queue's entries make it:
// per host, its leased count (entries with a lease, expired or not) and
// its head (the first candidate by rank and seq); a host without entries
// keeps a row only while parked.
func checkHosts(t *testing.T, s *Store, step string) {
	t.Helper()
	type state struct {
		leased            int64
		headRank, headSeq *int64
		parked            bool
		entries           bool
	}
	want := map[string]*state{}
	rows, err := s.db.Query(`SELECT host, COUNT(lease_until) FROM queue GROUP BY host`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		st := &state{entries: true}
		var host string
		if err := rows.Scan(&host, &st.leased); err != nil {
			t.Fatal(err)
		}
		want[host] = st
	}
	rows.Close()
	rows, err = s.db.Query(`SELECT host, rank, MIN(seq) FROM queue q
		WHERE lease_until IS NULL AND not_before = 0 AND rank = (SELECT MIN(rank) FROM queue
			WHERE host = q.host AND lease_until IS NULL AND not_before = 0)
		GROUP BY host`)
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
	rows, err = s.db.Query(`SELECT host, leased, head_rank, head_seq, parked FROM queue_hosts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		st := &state{}
		var host string
		if err := rows.Scan(&host, &st.leased, &st.headRank, &st.headSeq, &st.parked); err != nil {
			t.Fatal(err)
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
		if want[host] == nil && (!g.parked || g.leased != 0 || g.headSeq != nil) {
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
	entry := 0
	for step := range steps {
		var op string
		switch k := r.IntN(13); {
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
			if es, err = s.Lease(ctx, 1+r.IntN(3), time.Duration(1+r.IntN(3))*time.Minute); err == nil {
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
			err = s.Renew(ctx, time.Duration(1+r.IntN(3))*time.Minute, pick())
		case k == 10:
			op = "SetHostReady"
			err = s.SetHostReady(ctx, map[string]time.Time{
				hosts[r.IntN(len(hosts))]: now.Add(time.Duration(r.IntN(4)-1) * time.Minute),
				"idle.example":            now.Add(time.Duration(r.IntN(3)) * time.Minute),
			})
		case k == 11:
			op = "Head"
			_, err = s.Head(ctx, 1+r.IntN(6))
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
