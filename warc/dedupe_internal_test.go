package warc

import (
	"crypto/sha1"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func sumOf(i int) [20]byte { return sha1.Sum(fmt.Appendf(nil, "body %d", i)) }

func captureOf(i int) capture {
	return capture{
		id:   fmt.Sprintf("urn:uuid:%08d-0000-4000-8000-000000000000", i),
		uri:  fmt.Sprintf("http://127.0.0.1/p/%d", i),
		date: "2026-11-27T05:00:00.123456789Z",
	}
}

// The index answers with the first capture of a digest, whether that
// capture still waits in memory or was spilled to the file long before.
func TestSeenIndexSpills(t *testing.T) {
	s := newSeenIndex()
	defer s.close()
	const n = 3000 // about six spills of captures
	for i := range n {
		if _, dup := s.first(sumOf(i), captureOf(i)); dup {
			t.Fatalf("body %d: a duplicate on first sight", i)
		}
	}
	if s.f == nil || s.flushed == 0 {
		t.Fatalf("%d captures never reached the file (flushed %d)", n, s.flushed)
	}
	for _, i := range []int{0, 1, 499, 1500, n - 2, n - 1} {
		got, dup := s.first(sumOf(i), captureOf(n+i))
		if !dup || got != captureOf(i) {
			t.Errorf("body %d again: %+v, %v; want the first capture %+v", i, got, dup, captureOf(i))
		}
	}
}

// A capture longer than the read scratch (a long URI) is read back whole.
func TestSeenIndexLongURI(t *testing.T) {
	s := newSeenIndex()
	defer s.close()
	long := captureOf(0)
	long.uri = "http://127.0.0.1/" + strings.Repeat("x", 5000)
	s.first(sumOf(0), long)
	for i := 1; s.flushed == 0; i++ {
		s.first(sumOf(i), captureOf(i))
	}
	if got, dup := s.first(sumOf(0), captureOf(1)); !dup || got != long {
		t.Errorf("long capture: %v, dup %v", got.uri[:min(len(got.uri), 40)], dup)
	}
}

// Two bodies whose digests share the index's 8-byte key are told apart by
// the whole digest: the second is not taken for a copy of the first.
func TestSeenIndexPrefixCollision(t *testing.T) {
	s := newSeenIndex()
	defer s.close()
	a, b := sumOf(1), sumOf(1)
	b[19] ^= 1
	s.first(a, captureOf(1))
	if _, dup := s.first(b, captureOf(2)); dup {
		t.Error("a different body with the same 8-byte prefix was taken for a duplicate")
	}
	if got, dup := s.first(a, captureOf(3)); !dup || got != captureOf(1) {
		t.Errorf("the first body again: %+v, %v", got, dup)
	}
}

// After close (the Writer was closed) the index answers "not seen"
// without failing.
func TestSeenIndexClosed(t *testing.T) {
	s := newSeenIndex()
	s.first(sumOf(1), captureOf(1))
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if _, dup := s.first(sumOf(1), captureOf(2)); dup {
		t.Error("a closed index answered with a capture")
	}
}

// When the index's file cannot be created ($TMPDIR gone or full), the
// index stops taking bodies and counts them, while the captures it took
// still answer and nothing fails.
func TestSeenIndexFileFails(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	s := newSeenIndex()
	defer s.close()
	i := 0
	for ; !s.full; i++ {
		if i > 10_000 {
			t.Fatal("the index never tried to spill")
		}
		s.first(sumOf(i), captureOf(i))
	}
	took := i
	if s.f != nil || s.flushed != 0 {
		t.Fatalf("a file was written: %v, %d bytes", s.f, s.flushed)
	}
	const more = 50
	for j := range more {
		if _, dup := s.first(sumOf(took+j), captureOf(took+j)); dup {
			t.Fatalf("body %d: a duplicate on first sight", took+j)
		}
	}
	if got := s.count(); got != more {
		t.Errorf("count() = %d bodies not taken, want %d", got, more)
	}
	// A body taken before the failure is still found, from memory; one
	// refused after it is not (it is archived whole again).
	if got, dup := s.first(sumOf(0), captureOf(took+more)); !dup || got != captureOf(0) {
		t.Errorf("body 0 again: %+v, %v; want its first capture", got, dup)
	}
	if _, dup := s.first(sumOf(took), captureOf(took+more+1)); dup {
		t.Errorf("body %d, refused by the full index, was found again", took)
	}
	w := &Writer{seen: s}
	if got := w.Counts().DedupeSkipped; got != more+1 {
		t.Errorf("Counts().DedupeSkipped = %d, want %d", got, more+1)
	}
}

// The index holds a few dozen bytes of memory per distinct body, whatever
// the length of its URI: the captures are on disk.
func TestSeenIndexMemoryPerBody(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	s := newSeenIndex()
	defer s.close()
	const n = 100_000
	sums := make([][20]byte, n)
	for i := range sums {
		sums[i] = sumOf(i)
	}
	c := captureOf(0)
	c.uri += strings.Repeat("/long-path", 20)
	before := heap()
	for i := range n {
		s.first(sums[i], c)
	}
	if len(s.pos) != n || s.full {
		t.Fatalf("the index holds %d of %d bodies (full: %v)", len(s.pos), n, s.full)
	}
	after := heap()
	runtime.KeepAlive(sums)
	per := float64(after-before) / n
	t.Logf("%.1f bytes of heap per distinct body", per)
	if per > 64 {
		t.Errorf("%.1f bytes of heap per distinct body, want at most 64 (the old map held about 270)", per)
	}
}

// Record IDs are random (version 4, variant 10) UUID URNs, each new.
func TestNewRecordID(t *testing.T) {
	re := regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := make(map[string]bool)
	for range 1000 {
		id, err := newRecordID()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("record ID %q: malformed or repeated", id)
		}
		seen[id] = true
	}
}
