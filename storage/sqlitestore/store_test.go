package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// openTest opens a Store on a fresh file in t.TempDir and closes it at cleanup.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crawl.db")
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func pushStrings(t testing.TB, q storage.Queue, data ...string) {
	t.Helper()
	b := make([][]byte, len(data))
	for i, d := range data {
		b[i] = []byte(d)
	}
	if err := q.Push(context.Background(), b...); err != nil {
		t.Fatalf("Push(%q) error = %v", data, err)
	}
}

func leaseStrings(t testing.TB, q storage.Queue, n int, ttl time.Duration) ([]string, []storage.Entry) {
	t.Helper()
	es, err := q.Lease(context.Background(), n, ttl)
	if err != nil {
		t.Fatalf("Lease(%d, %v) error = %v", n, ttl, err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Data)
	}
	return out, es
}

func TestOpenInvalid(t *testing.T) {
	for _, path := range []string{"", "a?b"} {
		if _, err := Open(path); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Open(%q) error = %v, want %v", path, err, ErrInvalidPath)
		}
	}
}

func TestSchemaVersionTooNew(t *testing.T) {
	s, path := openTest(t)
	if _, err := s.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open(%q) error = %v, want %v", path, err, ErrSchemaVersion)
	}
}

func TestQueueOrderAckRelease(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	pushStrings(t, s, "a", "b", "c")
	got, es := leaseStrings(t, s, 2, time.Minute)
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("Lease(2) = %q, want [a b]", got)
	}
	if l, err := s.Len(ctx); err != nil || l != (storage.QueueLen{Ready: 1, Leased: 2}) {
		t.Fatalf("Len() = %+v, %v, want Ready 1 Leased 2", l, err)
	}
	if err := s.Ack(ctx, es[0].ID); err != nil {
		t.Fatalf("Ack(%q) error = %v", es[0].ID, err)
	}
	if err := s.Ack(ctx, es[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("second Ack(%q) error = %v, want %v", es[0].ID, err, storage.ErrUnknownLease)
	}
	if err := s.Release(ctx, es[1].ID, time.Time{}); err != nil {
		t.Fatalf("Release(%q) error = %v", es[1].ID, err)
	}
	got, es = leaseStrings(t, s, 5, time.Minute)
	if fmt.Sprint(got) != "[b c]" || es[0].Deliveries != 2 || es[1].Deliveries != 1 {
		t.Fatalf("Lease(5) = %q deliveries %d,%d, want [b c] deliveries 2,1", got, es[0].Deliveries, es[1].Deliveries)
	}
	if _, err := s.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease on drained queue error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	if err := s.Ack(ctx, es[0].ID, "garbage", es[1].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Ack with a bad ID error = %v, want %v", err, storage.ErrUnknownLease)
	}
	if l, err := s.Len(ctx); err != nil || l.Total() != 0 {
		t.Fatalf("Len() after acks = %+v, %v, want empty (good IDs acked despite the bad one)", l, err)
	}
}

func TestLeaseInvalidArgument(t *testing.T) {
	s, _ := openTest(t)
	for _, c := range []struct {
		n   int
		ttl time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, 0}} {
		if _, err := s.Lease(context.Background(), c.n, c.ttl); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Lease(%d, %v) error = %v, want %v", c.n, c.ttl, err, ErrInvalidArgument)
		}
	}
}

func TestLeaseExpiryAndStaleAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, err := Open(filepath.Join(t.TempDir(), "q.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pushStrings(t, s, "x")
		_, first := leaseStrings(t, s, 1, time.Second)
		if _, err := s.Lease(ctx, 1, time.Second); !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("Lease while leased error = %v, want %v", err, storage.ErrQueueEmpty)
		}
		drain(s.Notify())
		// Notify fires when the lease expires, in virtual time.
		select {
		case <-s.Notify():
		case <-time.After(2 * time.Second):
			t.Fatal("Notify() did not fire when the lease expired")
		}
		_, second := leaseStrings(t, s, 1, time.Second)
		if second[0].Deliveries != 2 {
			t.Fatalf("re-lease Deliveries = %d, want 2", second[0].Deliveries)
		}
		if err := s.Ack(ctx, first[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
			t.Fatalf("Ack(stale %q) error = %v, want %v", first[0].ID, err, storage.ErrUnknownLease)
		}
		if err := s.Release(ctx, first[0].ID, time.Time{}); !errors.Is(err, storage.ErrUnknownLease) {
			t.Fatalf("Release(stale %q) error = %v, want %v", first[0].ID, err, storage.ErrUnknownLease)
		}
		if err := s.Ack(ctx, second[0].ID); err != nil {
			t.Fatalf("Ack(current %q) error = %v", second[0].ID, err)
		}
	})
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func TestReleaseNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, err := Open(filepath.Join(t.TempDir(), "q.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pushStrings(t, s, "x")
		_, es := leaseStrings(t, s, 1, time.Hour)
		if err := s.Release(ctx, es[0].ID, time.Now().Add(time.Minute)); err != nil {
			t.Fatalf("Release error = %v", err)
		}
		if l, err := s.Len(ctx); err != nil || l != (storage.QueueLen{Delayed: 1}) {
			t.Fatalf("Len() = %+v, %v, want Delayed 1", l, err)
		}
		if _, err := s.Lease(ctx, 1, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("Lease before notBefore error = %v, want %v", err, storage.ErrQueueEmpty)
		}
		drain(s.Notify())
		start := time.Now()
		<-s.Notify()
		if waited := time.Since(start); waited < 59*time.Second || waited > time.Minute {
			t.Fatalf("Notify fired after %v, want about 1m (the notBefore time)", waited)
		}
		if got, _ := leaseStrings(t, s, 1, time.Hour); fmt.Sprint(got) != "[x]" {
			t.Fatalf("Lease after notBefore = %q, want [x]", got)
		}
	})
}

func TestNotifyOnPush(t *testing.T) {
	s, _ := openTest(t)
	select {
	case <-s.Notify():
		t.Fatal("Notify() fired before any event")
	default:
	}
	pushStrings(t, s, "a")
	pushStrings(t, s, "b")
	select {
	case <-s.Notify():
	default:
		t.Fatal("Notify() did not fire after Push")
	}
}

func TestMaxSize(t *testing.T) {
	s, _ := openTest(t, WithMaxSize(2))
	pushStrings(t, s, "a")
	if err := s.Push(context.Background(), []byte("b"), []byte("c")); !errors.Is(err, storage.ErrQueueFull) {
		t.Fatalf("Push over MaxSize error = %v, want %v", err, storage.ErrQueueFull)
	}
	if l, _ := s.Len(context.Background()); l.Total() != 1 {
		t.Fatalf("Len after refused batch = %+v, want 1 entry (all or none)", l)
	}
	pushStrings(t, s, "b")
}

func TestClosed(t *testing.T) {
	s, _ := openTest(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close() error = %v", err)
	}
	ctx := context.Background()
	u, _ := url.Parse("http://example.com/")
	_, errLease := s.Lease(ctx, 1, time.Second)
	_, errAdd := s.AddVisited(ctx, 1)
	_, errLen := s.Len(ctx)
	_, errVisited := s.IsVisited(1)
	_, errCookies := s.GetCookies(ctx, u)
	for name, err := range map[string]error{
		"Push": s.Push(ctx, []byte("a")), "Lease": errLease, "Ack": s.Ack(ctx, "1:1"),
		"Release": s.Release(ctx, "1:1", time.Time{}), "Len": errLen, "AddVisited": errAdd,
		"RemoveVisited": s.RemoveVisited(ctx, 1), "IsVisited": errVisited, "Visited": s.Visited(1),
		"GetCookies": errCookies, "PutCookies": s.PutCookies(ctx, u, "a=b"), "Init": s.Init(),
	} {
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close error = %v, want %v", name, err, storage.ErrClosed)
		}
	}
}

func TestReopenKeepsState(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	pushStrings(t, s, "a", "b", "c")
	_, es := leaseStrings(t, s, 2, time.Hour)
	if err := s.Ack(ctx, es[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddVisited(ctx, 7, 1<<63+5); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://example.com/")
	if err := s.PutCookies(ctx, u, "k=v"); err != nil {
		t.Fatal(err)
	}
	// Close returns the unacknowledged lease on "b".
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen error = %v", err)
	}
	defer s2.Close()
	if got, _ := leaseStrings(t, s2, 5, time.Hour); fmt.Sprint(got) != "[b c]" {
		t.Fatalf("Lease after reopen = %q, want [b c]", got)
	}
	added, err := s2.AddVisited(ctx, 7, 1<<63+5, 8)
	if err != nil || fmt.Sprint(added) != "[false false true]" {
		t.Fatalf("AddVisited after reopen = %v, %v, want [false false true]", added, err)
	}
	if c, err := s2.GetCookies(ctx, u); err != nil || c != "k=v" {
		t.Fatalf("GetCookies after reopen = %q, %v, want k=v", c, err)
	}
}

// TestOpenReturnsDeadOwnersLeases simulates a crashed process: its leases
// are marked with an owner whose pid no longer exists.
func TestOpenReturnsDeadOwnersLeases(t *testing.T) {
	ctx := context.Background()
	a, path := openTest(t)
	pushStrings(t, a, "a", "b")
	leaseStrings(t, a, 2, time.Hour)

	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot start a process to obtain a dead pid: %v", err)
	}
	if _, err := a.db.Exec("UPDATE owners SET pid = ? WHERE owner = ?", cmd.Process.Pid, a.owner); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, _ := leaseStrings(t, b, 5, time.Hour); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("Lease after the owner died = %q, want [a b]", got)
	}

	// A live owner's leases are left alone.
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Lease(ctx, 5, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease of a live owner's entries error = %v, want %v", err, storage.ErrQueueEmpty)
	}
}

// TestTwoStoresOneFile shows that AddVisited is exact across two Stores
// (two connections, as two processes would have) on one WAL file, and that
// they never lease the same entry.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	a, path := openTest(t)
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const ids, workers = 2000, 4
	var mu sync.Mutex
	winners := make(map[uint64]int)
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := range workers * 2 {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for start := 0; start < ids; start += 50 {
				batch := make([]uint64, 50)
				for i := range batch {
					// Workers walk the IDs in different orders to collide often.
					batch[i] = uint64((start + i + w*37) % ids)
				}
				added, err := s.AddVisited(ctx, batch...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i, ok := range added {
					if ok {
						winners[batch[i]]++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("AddVisited error = %v", err)
	}
	if len(winners) != ids {
		t.Fatalf("%d IDs were added, want %d", len(winners), ids)
	}
	for id, n := range winners {
		if n != 1 {
			t.Fatalf("ID %d was added %d times, want 1", id, n)
		}
	}

	// Leasing from both: every entry exactly once.
	data := make([][]byte, 500)
	for i := range data {
		data[i] = fmt.Appendf(nil, "%d", i)
	}
	if err := a.Push(ctx, data...); err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]int)
	for _, s := range []*Store{a, b} {
		wg.Go(func() {
			for {
				es, err := s.Lease(ctx, 7, time.Hour)
				if err != nil {
					return
				}
				mu.Lock()
				for _, e := range es {
					seen[string(e.Data)]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != len(data) {
		t.Fatalf("%d entries leased, want %d", len(seen), len(data))
	}
	for d, n := range seen {
		if n != 1 {
			t.Fatalf("entry %s leased %d times, want 1", d, n)
		}
	}
}

func TestCookies(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustURL := func(raw string) *url.URL {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	steps := []struct {
		put, from string // Set-Cookie lines received from a URL ("" for none)
		get       string
		want      string
	}{
		{put: "a=1\nb=2; Path=/x", from: "http://h.test/", get: "http://h.test/", want: "a=1"},
		{get: "http://h.test/x/y", want: "a=1\nb=2; Path=/x"},
		{get: "http://h.test/xy", want: "a=1"},
		{get: "http://other.test/", want: ""},
		{get: "http://H.test:8080/", want: "a=1"},
		{put: "a=3", from: "http://h.test/", get: "http://h.test/", want: "a=3"},
		{put: "a=; Max-Age=-1", from: "http://h.test/", get: "http://h.test/x", want: "b=2; Path=/x"},
		{put: "s=1; Secure", from: "https://h.test/", get: "http://h.test/", want: ""},
		{get: "https://h.test/", want: "s=1; Secure"},
		{put: "old=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT\n\x00bad", from: "https://h.test/", get: "https://h.test/", want: "s=1; Secure"},
	}
	for i, st := range steps {
		if st.put != "" {
			if err := s.PutCookies(ctx, mustURL(st.from), st.put); err != nil {
				t.Fatalf("step %d: PutCookies(%q) error = %v", i, st.put, err)
			}
		}
		got, err := s.GetCookies(ctx, mustURL(st.get))
		if err != nil || got != st.want {
			t.Fatalf("step %d: GetCookies(%q) = %q, %v, want %q", i, st.get, got, err, st.want)
		}
	}
	s.SetCookies(mustURL("http://c.test/"), "z=9")
	if got := s.Cookies(mustURL("http://c.test/")); got != "z=9" {
		t.Fatalf("Cookies() = %q, want z=9", got)
	}
}

func TestStorageInterface(t *testing.T) {
	s, _ := openTest(t)
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{0, 1, 1<<64 - 1} {
		if ok, err := s.IsVisited(id); err != nil || ok {
			t.Fatalf("IsVisited(%d) = %v, %v before Visited", id, ok, err)
		}
		if err := s.Visited(id); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.IsVisited(id); err != nil || !ok {
			t.Fatalf("IsVisited(%d) = %v, %v after Visited, want true", id, ok, err)
		}
	}
	if err := s.RemoveVisited(context.Background(), 1, 12345); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.IsVisited(1); ok {
		t.Fatal("IsVisited(1) = true after RemoveVisited")
	}
	added, err := s.AddVisited(context.Background(), 1, 1, 0)
	if err != nil || fmt.Sprint(added) != "[true false false]" {
		t.Fatalf("AddVisited(1, 1, 0) = %v, %v, want [true false false]", added, err)
	}
}

// TestIntegrity checks the file after a batch of writes.
func TestIntegrity(t *testing.T) {
	s, path := openTest(t)
	pushStrings(t, s, "a", "b")
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check = %q, %v, want ok", res, err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v, want wal", mode, err)
	}
}
