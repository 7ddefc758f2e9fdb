package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/redis/go-redis/v9"
)

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

func TestNewInvalid(t *testing.T) {
	if _, err := New(Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("New(no Addr) error = %v, want %v", err, ErrInvalidArgument)
	}
	if _, err := NewFromClient(nil, Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewFromClient(nil) error = %v, want %v", err, ErrInvalidArgument)
	}
}

// TestServerDown uses miniredis, which the test can stop at will.
func TestServerDown(t *testing.T) {
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	// No retries: each call fails at its first refused connection.
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	s, err := NewFromClient(rdb, Options{Prefix: "down"})
	if err != nil {
		t.Fatalf("NewFromClient error = %v", err)
	}
	if err := s.Visited(1); err != nil {
		t.Fatalf("Visited with the server up error = %v", err)
	}
	mr.Close()
	ctx := context.Background()
	u, _ := url.Parse("http://h.test/")
	_, errVisited := s.IsVisited(1)
	_, errAdd := s.AddVisited(ctx, 2)
	_, errGet := s.GetCookies(ctx, u)
	for name, err := range map[string]error{
		"IsVisited": errVisited, "AddVisited": errAdd, "GetCookies": errGet,
		"PutCookies": s.PutCookies(ctx, u, "a=b"), "Init": s.Init(),
	} {
		if err == nil {
			t.Errorf("%s with the server down error = nil, want an error", name)
		}
	}
	if _, err := New(Options{Addr: addr}); err == nil {
		t.Errorf("New(%q) with the server down error = nil, want an error", addr)
	}
}

func TestQueueOrderAckRelease(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if _, err := s.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease on a new queue error = %v, want %v", err, storage.ErrQueueEmpty)
	}
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
		t.Fatalf("Lease(5) = %q deliveries %d,%d, want [b c] deliveries 2,1 (a released entry keeps its place)",
			got, es[0].Deliveries, es[1].Deliveries)
	}
	if _, err := s.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease on a drained queue error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	if err := s.Ack(ctx, es[0].ID, "garbage", "1-0:zz", es[1].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Ack with bad IDs error = %v, want %v", err, storage.ErrUnknownLease)
	}
	if l, err := s.Len(ctx); err != nil || l.Total() != 0 {
		t.Fatalf("Len() after acks = %+v, %v, want empty (good IDs acked despite the bad ones)", l, err)
	}
	if err := s.Release(ctx, "nonsense", time.Time{}); !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Release(nonsense) error = %v, want %v", err, storage.ErrUnknownLease)
	}
}

func TestBinaryData(t *testing.T) {
	s := newTestStore(t, Options{})
	payloads := [][]byte{{}, {0, ':', 0xff, '\n'}, []byte("7:1-0:x")}
	if err := s.Push(context.Background(), payloads...); err != nil {
		t.Fatal(err)
	}
	_, es := leaseStrings(t, s, 10, time.Minute)
	if len(es) != len(payloads) {
		t.Fatalf("Lease got %d entries, want %d", len(es), len(payloads))
	}
	for i, e := range es {
		if string(e.Data) != string(payloads[i]) {
			t.Errorf("entry %d Data = %q, want %q", i, e.Data, payloads[i])
		}
	}
	// The delayed set keeps data in its member: check that path too.
	if err := s.Release(context.Background(), es[1].ID, time.Now().Add(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var back []storage.Entry
	if !eventually(t, 5*time.Second, func() bool {
		back, _ = s.Lease(context.Background(), 1, time.Minute)
		return len(back) == 1
	}) {
		t.Fatal("released entry never came back")
	}
	if string(back[0].Data) != string(payloads[1]) || back[0].Deliveries != 2 {
		t.Fatalf("delayed entry = %q deliveries %d, want %q deliveries 2", back[0].Data, back[0].Deliveries, payloads[1])
	}
}

func TestLeaseInvalidArgument(t *testing.T) {
	s := newTestStore(t, Options{})
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
	ctx := context.Background()
	s := newTestStore(t, Options{})
	pushStrings(t, s, "x")
	_, first := leaseStrings(t, s, 1, 100*time.Millisecond)
	if _, err := s.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease while leased error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	var second []storage.Entry
	if !eventually(t, 5*time.Second, func() bool {
		second, _ = s.Lease(ctx, 1, time.Minute)
		return len(second) == 1
	}) {
		t.Fatal("expired lease was never taken over")
	}
	if second[0].Deliveries != 2 || string(second[0].Data) != "x" {
		t.Fatalf("taken-over entry = %q deliveries %d, want x deliveries 2", second[0].Data, second[0].Deliveries)
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
	if l, err := s.Len(ctx); err != nil || l.Total() != 0 {
		t.Fatalf("Len() = %+v, %v, want empty", l, err)
	}
}

func TestReleaseNotBefore(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, Options{})
	pushStrings(t, s, "x")
	_, es := leaseStrings(t, s, 1, time.Hour)
	if err := s.Release(ctx, es[0].ID, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	if l, err := s.Len(ctx); err != nil || l != (storage.QueueLen{Delayed: 1}) {
		t.Fatalf("Len() = %+v, %v, want Delayed 1", l, err)
	}
	if _, err := s.Lease(ctx, 1, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease before notBefore error = %v, want %v", err, storage.ErrQueueEmpty)
	}
	if !eventually(t, 5*time.Second, func() bool {
		l, err := s.Len(ctx)
		return err == nil && l == storage.QueueLen{Ready: 1}
	}) {
		t.Fatal("Len never showed the delayed entry as ready")
	}
	if got, _ := leaseStrings(t, s, 1, time.Hour); fmt.Sprint(got) != "[x]" {
		t.Fatalf("Lease after notBefore = %q, want [x]", got)
	}
}

func TestMaxSize(t *testing.T) {
	s := newTestStore(t, Options{MaxSize: 2})
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
	s := newTestStore(t, Options{})
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
		"Push": s.Push(ctx, []byte("a")), "Lease": errLease, "Ack": s.Ack(ctx, "1-0:1"),
		"Release": s.Release(ctx, "1-0:1", time.Time{}), "Len": errLen, "AddVisited": errAdd,
		"RemoveVisited": s.RemoveVisited(ctx, 1), "IsVisited": errVisited, "Visited": s.Visited(1),
		"GetCookies": errCookies, "PutCookies": s.PutCookies(ctx, u, "a=b"), "Init": s.Init(),
		"Clear": s.Clear(ctx),
	} {
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close error = %v, want %v", name, err, storage.ErrClosed)
		}
	}
}

func TestNewFromClientLeavesClientOpen(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(t)})
	defer rdb.Close()
	s, err := NewFromClient(rdb, Options{Prefix: randomPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("client after Store.Close: Ping error = %v, want nil", err)
	}
}

func TestStorageInterface(t *testing.T) {
	s := newTestStore(t, Options{VisitedShards: 7})
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{0, 1, 1 << 63, 1<<64 - 1} {
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

func TestCookies(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx := context.Background()
	mustURL := func(raw string) *url.URL {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	steps := []struct {
		put, from string
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
	// Concurrent writers of one host lose nothing.
	u := mustURL("http://c.test/")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { s.SetCookies(u, fmt.Sprintf("k%d=%d", i, i)) })
	}
	wg.Wait()
	got := s.Cookies(u)
	for i := range 8 {
		if !containsLine(got, fmt.Sprintf("k%d=%d", i, i)) {
			t.Fatalf("Cookies() = %q, missing k%d after concurrent SetCookies", got, i)
		}
	}
}

func containsLine(s, line string) bool { return slices.Contains(strings.Split(s, "\n"), line) }

// TestThreeConsumers runs three Stores as three processes on one stream:
// with acks every entry is processed exactly once; a consumer that
// abandons its leases has them taken over by the others after the TTL.
func TestThreeConsumers(t *testing.T) {
	ctx := context.Background()
	prefix := randomPrefix()
	stores := []*Store{
		newTestStore(t, Options{Prefix: prefix}),
		newTestStore(t, Options{Prefix: prefix}),
		newTestStore(t, Options{Prefix: prefix}),
	}
	const total = 600
	data := make([][]byte, total)
	for i := range data {
		data[i] = fmt.Appendf(nil, "e%d", i)
	}
	if err := stores[0].Push(ctx, data...); err != nil {
		t.Fatal(err)
	}

	// The third consumer leases 20 entries with a short TTL and dies.
	abandoned, err := stores[2].Lease(ctx, 20, 200*time.Millisecond)
	if err != nil || len(abandoned) != 20 {
		t.Fatalf("Lease(20) = %d entries, %v, want 20", len(abandoned), err)
	}

	var mu sync.Mutex
	processed := make(map[string]int)
	deliveries := make(map[string]int)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range stores[:2] {
		wg.Go(func() {
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				done := len(processed) == total
				mu.Unlock()
				if done {
					return
				}
				es, err := s.Lease(ctx, 8, time.Minute)
				if errors.Is(err, storage.ErrQueueEmpty) {
					// Waiting for the abandoned leases to expire on the server's clock.
					<-time.After(5 * time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				ids := make([]string, len(es))
				mu.Lock()
				for i, e := range es {
					processed[string(e.Data)]++
					deliveries[string(e.Data)] = e.Deliveries
					ids[i] = e.ID
				}
				mu.Unlock()
				if err := s.Ack(ctx, ids...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("consumer error = %v", err)
	}
	if len(processed) != total {
		t.Fatalf("%d distinct entries processed, want %d", len(processed), total)
	}
	for d, n := range processed {
		if n != 1 {
			t.Errorf("entry %s processed %d times, want 1", d, n)
		}
	}
	for _, e := range abandoned {
		if got := deliveries[string(e.Data)]; got != 2 {
			t.Errorf("abandoned entry %s taken over with Deliveries %d, want 2", e.Data, got)
		}
	}
	// The dead consumer's IDs no longer work.
	if err := stores[2].Ack(ctx, abandoned[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Ack by the abandoning consumer error = %v, want %v", err, storage.ErrUnknownLease)
	}
	if l, err := stores[0].Len(ctx); err != nil || l.Total() != 0 {
		t.Fatalf("Len() = %+v, %v, want empty", l, err)
	}
}
