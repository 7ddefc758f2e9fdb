package sqlitestore

import (
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
)

// waitUntil polls f until it is true or a generous deadline passes: the TTL
// runs on the wall clock that SQLite rows record.
func waitUntil(t *testing.T, f func() bool) bool {
	t.Helper()
	deadline := time.After(30 * time.Second)
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

func TestVisitedTTL(t *testing.T) {
	const ttl = 200 * time.Millisecond
	s, path := openTest(t, WithVisitedTTL(ttl))
	ctx := t.Context()
	if got, err := s.AddVisited(ctx, 1, 2); err != nil || !got[0] || !got[1] {
		t.Fatalf("AddVisited(1, 2) = %v, %v; want [true true], nil", got, err)
	}
	if got, err := s.AddVisited(ctx, 1); err != nil || got[0] {
		t.Fatalf("AddVisited(1) again = %v, %v; want [false], nil", got, err)
	}
	if got, err := s.PushUnvisited(ctx, []uint64{1, 3}, [][]byte{[]byte("a"), []byte("b")}); err != nil || got[0] || !got[1] {
		t.Fatalf("PushUnvisited(1, 3) = %v, %v; want [false true], nil", got, err)
	}
	// A second Store on the file, with the same TTL, shares the marks.
	other, err := Open(path, WithVisitedTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ok, err := other.IsVisited(2); !ok || err != nil {
		t.Fatalf("other Store IsVisited(2) = %v, %v; want true, nil", ok, err)
	}
	if !waitUntil(t, func() bool { ok, err := s.IsVisited(1); return err == nil && !ok }) {
		t.Fatalf("IsVisited(1) still true long after its TTL (%v)", ttl)
	}
	if got, err := other.PushUnvisited(ctx, []uint64{2}, [][]byte{[]byte("c")}); err != nil || !got[0] {
		t.Errorf("PushUnvisited(2) after its mark expired = %v, %v; want [true], nil", got, err)
	}
	if got, err := other.AddVisited(ctx, 1, 2); err != nil || !got[0] || !got[1] {
		t.Errorf("AddVisited(1, 2) after the marks expired = %v, %v; want [true true], nil", got, err)
	}
	if err := s.RemoveVisited(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.IsVisited(1); ok {
		t.Errorf("IsVisited(1) after RemoveVisited = true, want false")
	}
	// Many IDs go through the multi-row path; they expire too.
	ids := make([]uint64, 200)
	for i := range ids {
		ids[i] = uint64(1000 + i)
	}
	if got, err := s.AddVisited(ctx, ids...); err != nil || !got[0] || !got[199] {
		t.Fatalf("AddVisited(200 IDs) = %v, want all added", err)
	}
	if !waitUntil(t, func() bool { ok, err := s.IsVisited(1199); return err == nil && !ok }) {
		t.Fatalf("IsVisited(1199) still true long after its TTL")
	}
	if got, err := s.AddVisited(ctx, ids...); err != nil || !got[0] || !got[199] {
		t.Errorf("AddVisited(200 IDs) after expiry: err %v, first %v, last %v; want all added again", err, got[0], got[199])
	}
}

func TestVisitedWithoutTTLStays(t *testing.T) {
	s, _ := openTest(t)
	if _, err := s.AddVisited(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'visited_expiry'").Scan(&n); err != nil || n != 0 {
		t.Errorf("a Store without a TTL created visited_expiry (%d, %v); want the schema unchanged", n, err)
	}
	if ok, err := s.IsVisited(7); !ok || err != nil {
		t.Errorf("IsVisited(7) = %v, %v; want true, nil", ok, err)
	}
}

func TestConformanceVisitedTTL(t *testing.T) {
	storagetest.RunVisited(t, func(t *testing.T) storage.VisitedSet {
		s, _ := openTest(t, WithVisitedTTL(time.Hour))
		return s
	})
}
