package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// RunQueue runs the conformance suite for a storage.Queue. open must return a
// fresh, empty queue on every call; the suite closes it. Queues that also
// implement storage.QueueNotifier get their Notify channel checked.
//
// Contract checked: FIFO leasing among ready entries; Lease(n) hands out at
// most n; ErrQueueEmpty when nothing is ready (errors.Is); Ack removes for
// good; Ack/Release of an unknown, acknowledged or taken-over lease returns
// ErrUnknownLease; Release returns an entry at once or, with a future
// not-before, counts it Delayed until then; an expired lease is taken over by
// another consumer whatever that consumer's own ttl, and the old lease ID
// stops working; Deliveries counts every lease; Len counts each state;
// concurrent pushers and leasers see every entry exactly once; after Close
// every method returns ErrClosed. Batch operations: a storage.LeaseRenewer
// keeps a renewed lease past its first ttl (and RenewLeases reports
// ErrUnsupported for a queue without it); ReleaseBatch, native or the loop,
// releases every held lease and reports the others with ErrUnknownLease.
// A storage.ResetDetector reports no reset of a store used normally
// (storage.CheckReset is nil for every other queue).
func RunQueue(t *testing.T, open func(t *testing.T) storage.Queue) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, q storage.Queue)
	}{
		{"PushLeaseFIFO", queuePushLeaseFIFO},
		{"LeaseN", queueLeaseN},
		{"LeaseEmpty", queueLeaseEmpty},
		{"LeaseBadArguments", queueLeaseBadArguments},
		{"PayloadBytes", queuePayloadBytes},
		{"PushNothing", queuePushNothing},
		{"PushCancelled", queuePushCancelled},
		{"AckRemoves", queueAckRemoves},
		{"AckUnknown", queueAckUnknown},
		{"ReleaseReady", queueReleaseReady},
		{"ReleaseDelayed", queueReleaseDelayed},
		{"LeaseExpiryTakeover", queueLeaseExpiryTakeover},
		{"Deliveries", queueDeliveries},
		{"Len", queueLen},
		{"Notify", queueNotify},
		{"Concurrent", queueConcurrent},
		{"Closed", queueClosed},
		{"Renew", queueRenew},
		{"RenewShortens", queueRenewShortens},
		{"ReleaseBatch", queueReleaseBatch},
		{"NotReset", queueNotReset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := open(t)
			t.Cleanup(func() { closeStore(t, q) })
			tt.run(t, q)
		})
	}
}

// RunQueueReopen runs the durability checks for a queue that persists
// entries: open(t, path) opens the store at path (a file for SQLite, a key
// prefix for Redis — whatever the backend makes of it); the suite opens the
// same path again after Close. Checked: pushed, unacknowledged entries
// survive Close and reopen in push order; acknowledged ones do not; a lease
// held when the store was closed comes back (with its delivery counted); a
// delayed entry stays delayed.
func RunQueueReopen(t *testing.T, open func(t *testing.T, path string) storage.Queue) {
	t.Helper()
	t.Run("Reopen", func(t *testing.T) {
		ctx := t.Context()
		path := t.TempDir() + "/queue"
		q := open(t, path)
		mustPush(t, q, "a", "b", "c", "d", "e")
		a := mustLease(t, q, 1, time.Minute)
		if err := q.Ack(ctx, a[0].ID); err != nil {
			t.Fatalf("Ack(%q) error = %v, want nil", a[0].ID, err)
		}
		b := mustLease(t, q, 1, time.Hour) // held across Close
		if string(b[0].Data) != "b" {
			t.Fatalf("Lease() = %q, want b", b[0].Data)
		}
		e := mustLease(t, q, 1, time.Hour)
		if string(e[0].Data) != "c" {
			t.Fatalf("Lease() = %q, want c", e[0].Data)
		}
		if err := q.Release(ctx, e[0].ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Release(%q, +1h) error = %v, want nil", e[0].ID, err)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close() error = %v, want nil", err)
		}

		q = open(t, path)
		t.Cleanup(func() { closeStore(t, q) })
		wantLen(t, q, storage.QueueLen{Ready: 3, Delayed: 1})
		got := mustLease(t, q, 10, time.Minute)
		if d := datas(got); !slices.Equal(d, []string{"b", "d", "e"}) {
			t.Fatalf("Lease(10) after reopen = %q, want [b d e]", d)
		}
		if got[0].Deliveries != 2 {
			t.Errorf("Deliveries of the entry leased at Close = %d, want 2", got[0].Deliveries)
		}
		if err := q.Ack(ctx, b[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
			t.Errorf("Ack(lease from before Close) error = %v, want %v", err, storage.ErrUnknownLease)
		}
	})
}

func queuePushLeaseFIFO(t *testing.T, q storage.Queue) {
	mustPush(t, q, "a", "b", "c")
	mustPush(t, q, "d")
	mustPush(t, q, "e", "f")
	var got []string
	for range 6 {
		es := mustLease(t, q, 1, time.Minute)
		got = append(got, datas(es)...)
	}
	if want := []string{"a", "b", "c", "d", "e", "f"}; !slices.Equal(got, want) {
		t.Errorf("leased %q, want %q", got, want)
	}
}

func queueLeaseN(t *testing.T, q storage.Queue) {
	mustPush(t, q, "a", "b", "c", "d", "e")
	if got := datas(mustLease(t, q, 3, time.Minute)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Lease(3) = %q, want [a b c]", got)
	}
	if got := datas(mustLease(t, q, 10, time.Minute)); !slices.Equal(got, []string{"d", "e"}) {
		t.Errorf("Lease(10) = %q, want [d e]", got)
	}
}

func queueLeaseEmpty(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	if es, err := q.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease() on an empty queue = %v, %v; want %v", es, err, storage.ErrQueueEmpty)
	}
	mustPush(t, q, "a")
	mustLease(t, q, 1, time.Minute)
	if es, err := q.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease() with every entry leased = %v, %v; want %v", es, err, storage.ErrQueueEmpty)
	}
}

func queueLeaseBadArguments(t *testing.T, q storage.Queue) {
	mustPush(t, q, "a")
	for _, tc := range []struct {
		n   int
		ttl time.Duration
	}{{0, time.Minute}, {-1, time.Minute}, {1, 0}, {1, -time.Second}} {
		if es, err := q.Lease(t.Context(), tc.n, tc.ttl); err == nil || errors.Is(err, storage.ErrQueueEmpty) {
			t.Errorf("Lease(%d, %v) = %v, %v; want an argument error", tc.n, tc.ttl, es, err)
		}
	}
	wantLen(t, q, storage.QueueLen{Ready: 1})
}

func queuePayloadBytes(t *testing.T, q storage.Queue) {
	payloads := [][]byte{
		{0, 1, 2, 0xff, 0xfe, '\n', '\r', 0},
		[]byte(`{"URL":"http://example.com/ü?q=1&r=2","Depth":3}`),
		bytes.Repeat([]byte("x"), 64<<10),
	}
	if err := q.Push(t.Context(), payloads...); err != nil {
		t.Fatalf("Push() error = %v, want nil", err)
	}
	es := mustLease(t, q, len(payloads), time.Minute)
	for i, e := range es {
		if !bytes.Equal(e.Data, payloads[i]) {
			t.Errorf("entry %d Data = %q (len %d), want %q (len %d)", i, trunc(e.Data), len(e.Data), trunc(payloads[i]), len(payloads[i]))
		}
	}
}

func queuePushNothing(t *testing.T, q storage.Queue) {
	if err := q.Push(t.Context()); err != nil {
		t.Fatalf("Push() with no data error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{})
}

func queuePushCancelled(t *testing.T, q storage.Queue) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := q.Push(ctx, []byte("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Push(cancelled ctx) error = %v, want %v", err, context.Canceled)
	}
	wantLen(t, q, storage.QueueLen{})
}

func queueAckRemoves(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a", "b", "c")
	es := mustLease(t, q, 3, time.Minute)
	if err := q.Ack(ctx, es[0].ID, es[2].ID); err != nil {
		t.Fatalf("Ack(a, c) error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{Leased: 1})
	if err := q.Ack(ctx, es[1].ID); err != nil {
		t.Fatalf("Ack(b) error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{})
	if es, err := q.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease() after acking all = %v, %v; want %v", es, err, storage.ErrQueueEmpty)
	}
	if err := q.Ack(ctx); err != nil {
		t.Errorf("Ack() with no IDs error = %v, want nil", err)
	}
}

func queueAckUnknown(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a")
	es := mustLease(t, q, 1, time.Minute)
	for _, id := range []string{"", "no-such-lease", "0-0", "1:1"} {
		if err := q.Ack(ctx, id); !errors.Is(err, storage.ErrUnknownLease) {
			t.Errorf("Ack(%q) error = %v, want %v", id, err, storage.ErrUnknownLease)
		}
		if err := q.Release(ctx, id, time.Time{}); !errors.Is(err, storage.ErrUnknownLease) {
			t.Errorf("Release(%q) error = %v, want %v", id, err, storage.ErrUnknownLease)
		}
	}
	wantLen(t, q, storage.QueueLen{Leased: 1})
	if err := q.Ack(ctx, es[0].ID); err != nil {
		t.Fatalf("Ack(%q) error = %v, want nil", es[0].ID, err)
	}
	if err := q.Ack(ctx, es[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("second Ack(%q) error = %v, want %v", es[0].ID, err, storage.ErrUnknownLease)
	}
	if err := q.Release(ctx, es[0].ID, time.Time{}); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Release(%q) after Ack error = %v, want %v", es[0].ID, err, storage.ErrUnknownLease)
	}
	wantLen(t, q, storage.QueueLen{})
}

func queueReleaseReady(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a", "b")
	es := mustLease(t, q, 1, time.Minute)
	if err := q.Release(ctx, es[0].ID, time.Time{}); err != nil {
		t.Fatalf("Release(%q, zero) error = %v, want nil", es[0].ID, err)
	}
	wantLen(t, q, storage.QueueLen{Ready: 2})
	if err := q.Ack(ctx, es[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Ack(released lease) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	// A not-before in the past is the same as the zero time.
	es = mustLease(t, q, 2, time.Minute)
	if got := datas(es); !sameSet(got, []string{"a", "b"}) {
		t.Fatalf("Lease(2) after Release = %q, want a and b", got)
	}
	for _, e := range es {
		if err := q.Release(ctx, e.ID, time.Now().Add(-time.Hour)); err != nil {
			t.Fatalf("Release(%q, -1h) error = %v, want nil", e.ID, err)
		}
	}
	wantLen(t, q, storage.QueueLen{Ready: 2})
}

func queueReleaseDelayed(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a")
	es := mustLease(t, q, 1, time.Minute)
	notBefore := time.Now().Add(2 * short)
	if err := q.Release(ctx, es[0].ID, notBefore); err != nil {
		t.Fatalf("Release(%q, +%v) error = %v, want nil", es[0].ID, 2*short, err)
	}
	if l := mustLen(t, q); l.Delayed != 1 || l.Ready != 0 || l.Leased != 0 {
		t.Fatalf("Len() right after a delayed Release = %+v, want Delayed 1", l)
	}
	if es, err := q.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease() before not-before = %v, %v; want %v", es, err, storage.ErrQueueEmpty)
	}
	var got []storage.Entry
	eventually(t, "delayed entry becomes leasable", func() bool {
		var err error
		got, err = q.Lease(ctx, 1, time.Minute)
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("Lease() error = %v, want nil or %v", err, storage.ErrQueueEmpty)
		}
		return err == nil
	})
	// 10 ms of slack for stores that keep times in milliseconds.
	if now := time.Now(); now.Before(notBefore.Add(-10 * time.Millisecond)) {
		t.Errorf("delayed entry leased %v before its not-before time", notBefore.Sub(now))
	}
	if string(got[0].Data) != "a" || got[0].Deliveries != 2 {
		t.Errorf("Lease() = %q with Deliveries %d, want a with 2", got[0].Data, got[0].Deliveries)
	}
}

func queueLeaseExpiryTakeover(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a")
	first := mustLease(t, q, 1, short)
	if es, err := q.Lease(ctx, 1, time.Minute); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease() while leased = %v, %v; want %v", es, err, storage.ErrQueueEmpty)
	}
	// The second consumer uses a long ttl: the first lease must expire after
	// its own ttl, not the taker's.
	var second []storage.Entry
	eventually(t, "expired lease taken over", func() bool {
		var err error
		second, err = q.Lease(ctx, 1, time.Hour)
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("Lease() error = %v, want nil or %v", err, storage.ErrQueueEmpty)
		}
		return err == nil
	})
	if string(second[0].Data) != "a" || second[0].Deliveries != 2 {
		t.Fatalf("takeover Lease() = %q with Deliveries %d, want a with 2", second[0].Data, second[0].Deliveries)
	}
	if second[0].ID == first[0].ID {
		t.Fatalf("takeover lease ID = %q, same as the expired lease", second[0].ID)
	}
	if err := q.Ack(ctx, first[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Ack(expired lease) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	if err := q.Release(ctx, first[0].ID, time.Time{}); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Release(expired lease) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	wantLen(t, q, storage.QueueLen{Leased: 1})
	if err := q.Ack(ctx, second[0].ID); err != nil {
		t.Fatalf("Ack(takeover lease) error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{})
}

func queueDeliveries(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a")
	for want := 1; want <= 3; want++ {
		es := mustLease(t, q, 1, time.Minute)
		if es[0].Deliveries != want {
			t.Fatalf("lease %d: Deliveries = %d, want %d", want, es[0].Deliveries, want)
		}
		if err := q.Release(ctx, es[0].ID, time.Time{}); err != nil {
			t.Fatalf("Release(%q) error = %v, want nil", es[0].ID, err)
		}
	}
	mustPush(t, q, "b")
	es := mustLease(t, q, 2, time.Minute)
	for _, e := range es {
		want := map[string]int{"a": 4, "b": 1}[string(e.Data)]
		if e.Deliveries != want {
			t.Errorf("entry %q Deliveries = %d, want %d", e.Data, e.Deliveries, want)
		}
	}
}

func queueLen(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	wantLen(t, q, storage.QueueLen{})
	mustPush(t, q, "a", "b", "c", "d")
	wantLen(t, q, storage.QueueLen{Ready: 4})
	es := mustLease(t, q, 2, time.Minute)
	wantLen(t, q, storage.QueueLen{Ready: 2, Leased: 2})
	if err := q.Release(ctx, es[0].ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("Release(+1h) error = %v, want nil", err)
	}
	l := wantLen(t, q, storage.QueueLen{Ready: 2, Delayed: 1, Leased: 1})
	if l.Pending() != 3 || l.Total() != 4 {
		t.Errorf("Pending(), Total() = %d, %d; want 3, 4", l.Pending(), l.Total())
	}
	if err := q.Ack(ctx, es[1].ID); err != nil {
		t.Fatalf("Ack() error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{Ready: 2, Delayed: 1})
}

func queueNotify(t *testing.T, q storage.Queue) {
	n, ok := q.(storage.QueueNotifier)
	if !ok {
		t.Skipf("%T does not implement storage.QueueNotifier", q)
	}
	ch := n.Notify()
	drain := func() {
		for {
			select {
			case <-ch:
			default:
				return
			}
		}
	}
	wait := func(after string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(waitFor):
			t.Fatalf("no Notify value within %v after %s", waitFor, after)
		}
	}
	drain()
	mustPush(t, q, "a")
	wait("Push")
	es := mustLease(t, q, 1, time.Minute)
	drain()
	if err := q.Release(t.Context(), es[0].ID, time.Time{}); err != nil {
		t.Fatalf("Release() error = %v, want nil", err)
	}
	wait("Release")
}

// queueConcurrent pushes from several goroutines while others lease and ack
// with random batch sizes; every entry must be seen exactly once.
func queueConcurrent(t *testing.T, q storage.Queue) {
	const (
		pushers   = 4
		perPusher = 250
		leasers   = 4
		total     = pushers * perPusher
	)
	ctx := t.Context()
	var notify <-chan struct{}
	if n, ok := q.(storage.QueueNotifier); ok {
		notify = n.Notify()
	}

	var (
		mu   sync.Mutex // guards seen and errs
		seen = make(map[string]int)
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	done := make(chan struct{})
	var closeDone sync.Once
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := 0; i < perPusher; {
				batch := 1 + (i+p)%5
				var data [][]byte
				for ; batch > 0 && i < perPusher; batch-- {
					data = append(data, fmt.Appendf(nil, "p%d-%d", p, i))
					i++
				}
				if err := q.Push(ctx, data...); err != nil {
					fail(fmt.Errorf("Push() error = %w", err))
					closeDone.Do(func() { close(done) })
					return
				}
			}
		})
	}
	for l := range leasers {
		wg.Go(func() {
			tk := time.NewTicker(tick)
			defer tk.Stop()
			for n := 1; ; n = n%8 + 1 + l%2 {
				select {
				case <-done:
					return
				default:
				}
				es, err := q.Lease(ctx, n, time.Minute)
				if errors.Is(err, storage.ErrQueueEmpty) {
					select {
					case <-done:
						return
					case <-notify:
					case <-tk.C:
					}
					continue
				}
				if err != nil {
					fail(fmt.Errorf("Lease(%d) error = %w", n, err))
					closeDone.Do(func() { close(done) })
					return
				}
				ids := make([]string, len(es))
				mu.Lock()
				for i, e := range es {
					seen[string(e.Data)]++
					ids[i] = e.ID
				}
				finished := len(seen) == total
				mu.Unlock()
				if err := q.Ack(ctx, ids...); err != nil {
					fail(fmt.Errorf("Ack() error = %w", err))
				}
				if finished {
					closeDone.Do(func() { close(done) })
				}
			}
		})
	}
	select {
	case <-done:
	case <-time.After(2 * waitFor):
		closeDone.Do(func() { close(done) })
		wg.Wait()
		t.Fatalf("after %v only %d of %d entries were leased", 2*waitFor, len(seen), total)
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(seen) != total {
		t.Errorf("leased %d distinct entries, want %d", len(seen), total)
	}
	for d, n := range seen {
		if n != 1 {
			t.Errorf("entry %q leased %d times, want 1", d, n)
		}
	}
	wantLen(t, q, storage.QueueLen{})
}

func queueClosed(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a", "b")
	es := mustLease(t, q, 1, time.Minute)
	if err := q.Close(); err != nil {
		t.Fatalf("Close() error = %v, want nil", err)
	}
	checks := []struct {
		name string
		err  error
	}{
		{"Push", q.Push(ctx, []byte("c"))},
		{"Lease", func() error { _, err := q.Lease(ctx, 1, time.Minute); return err }()},
		{"Ack", q.Ack(ctx, es[0].ID)},
		{"Release", q.Release(ctx, es[0].ID, time.Time{})},
		{"Len", func() error { _, err := q.Len(ctx); return err }()},
	}
	for _, c := range checks {
		if !errors.Is(c.err, storage.ErrClosed) {
			t.Errorf("%s() after Close error = %v, want %v", c.name, c.err, storage.ErrClosed)
		}
	}
	if err := q.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
		t.Errorf("second Close() error = %v, want nil or %v", err, storage.ErrClosed)
	}
}

func mustPush(t *testing.T, q storage.Queue, data ...string) {
	t.Helper()
	bs := make([][]byte, len(data))
	for i, d := range data {
		bs[i] = []byte(d)
	}
	if err := q.Push(t.Context(), bs...); err != nil {
		t.Fatalf("Push(%q) error = %v, want nil", data, err)
	}
}

func mustLease(t *testing.T, q storage.Queue, n int, ttl time.Duration) []storage.Entry {
	t.Helper()
	es, err := q.Lease(t.Context(), n, ttl)
	if err != nil {
		t.Fatalf("Lease(%d, %v) error = %v, want nil", n, ttl, err)
	}
	if len(es) == 0 || len(es) > n {
		t.Fatalf("Lease(%d, %v) returned %d entries, want 1..%d", n, ttl, len(es), n)
	}
	ids := make(map[string]bool, len(es))
	for _, e := range es {
		if e.ID == "" || ids[e.ID] {
			t.Fatalf("Lease(%d, %v) returned empty or duplicate ID %q", n, ttl, e.ID)
		}
		ids[e.ID] = true
	}
	return es
}

func mustLen(t *testing.T, q storage.Queue) storage.QueueLen {
	t.Helper()
	l, err := q.Len(t.Context())
	if err != nil {
		t.Fatalf("Len() error = %v, want nil", err)
	}
	return l
}

func wantLen(t *testing.T, q storage.Queue, want storage.QueueLen) storage.QueueLen {
	t.Helper()
	l := mustLen(t, q)
	if l != want {
		t.Errorf("Len() = %+v, want %+v", l, want)
	}
	return l
}

func datas(es []storage.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Data)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

func queueRenew(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	if _, ok := q.(storage.LeaseRenewer); !ok {
		if err := storage.RenewLeases(ctx, q, time.Hour, "x"); !errors.Is(err, storage.ErrUnsupported) {
			t.Fatalf("RenewLeases on a queue without Renew error = %v, want %v", err, storage.ErrUnsupported)
		}
		return
	}
	mustPush(t, q, "a", "b", "c")
	es := mustLease(t, q, 3, short)
	if len(es) != 3 {
		t.Fatalf("Lease(3) returned %d entries, want 3", len(es))
	}
	if err := q.Ack(ctx, es[2].ID); err != nil {
		t.Fatalf("Ack error = %v", err)
	}
	// The acknowledged lease is unknown; the held ones are renewed anyway.
	err := storage.RenewLeases(ctx, q, time.Hour, es[0].ID, es[2].ID, es[1].ID)
	if !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("Renew(held, acknowledged, held) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	leasedAt := time.Now()
	// Past the first ttl, a lease that was not renewed would be ready again.
	eventually(t, "two ttls passed", func() bool { return time.Since(leasedAt) > 2*short })
	if got, err := q.Lease(ctx, 2, time.Hour); !errors.Is(err, storage.ErrQueueEmpty) {
		t.Fatalf("Lease() after Renew = %q, %v; want %v (the leases were renewed)", datas(got), err, storage.ErrQueueEmpty)
	}
	wantLen(t, q, storage.QueueLen{Leased: 2})
	// The renewed leases are still the holder's.
	if err := q.Ack(ctx, es[0].ID, es[1].ID); err != nil {
		t.Fatalf("Ack(renewed leases) error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{})
	if err := storage.RenewLeases(ctx, q, time.Hour); err != nil {
		t.Errorf("Renew() of no IDs error = %v, want nil", err)
	}
}

func queueRenewShortens(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	if _, ok := q.(storage.LeaseRenewer); !ok {
		t.Skip("queue has no Renew (checked in Renew)")
	}
	mustPush(t, q, "a")
	first := mustLease(t, q, 1, time.Hour)
	// Renew counts ttl from now: a short renewal of a long lease lets it
	// expire, and another consumer takes it over.
	if err := storage.RenewLeases(ctx, q, short, first[0].ID); err != nil {
		t.Fatalf("Renew error = %v, want nil", err)
	}
	var second []storage.Entry
	eventually(t, "shortened lease taken over", func() bool {
		var err error
		second, err = q.Lease(ctx, 1, time.Hour)
		if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
			t.Fatalf("Lease() error = %v, want nil or %v", err, storage.ErrQueueEmpty)
		}
		return err == nil
	})
	if string(second[0].Data) != "a" || second[0].Deliveries != 2 {
		t.Fatalf("takeover Lease() = %q with Deliveries %d, want a with 2", second[0].Data, second[0].Deliveries)
	}
	if err := storage.RenewLeases(ctx, q, time.Hour, first[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("Renew(taken-over lease) error = %v, want %v", err, storage.ErrUnknownLease)
	}
}

func queueReleaseBatch(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	mustPush(t, q, "a", "b", "c", "d")
	es := mustLease(t, q, 4, time.Hour)
	if len(es) != 4 {
		t.Fatalf("Lease(4) returned %d entries, want 4", len(es))
	}
	if err := q.Ack(ctx, es[1].ID); err != nil {
		t.Fatalf("Ack error = %v", err)
	}
	err := storage.ReleaseBatch(ctx, q, time.Time{}, es[0].ID, es[1].ID, es[2].ID)
	if !errors.Is(err, storage.ErrUnknownLease) {
		t.Fatalf("ReleaseBatch(held, acknowledged, held) error = %v, want %v", err, storage.ErrUnknownLease)
	}
	wantLen(t, q, storage.QueueLen{Ready: 2, Leased: 1})
	// Released entries keep their place in push order.
	got := mustLease(t, q, 2, time.Hour)
	if !slices.Equal(datas(got), []string{"a", "c"}) {
		t.Fatalf("Lease(2) after ReleaseBatch = %q, want [a c]", datas(got))
	}
	for _, e := range got {
		if e.Deliveries != 2 {
			t.Errorf("redelivered %q Deliveries = %d, want 2", e.Data, e.Deliveries)
		}
	}
	// A future not-before delays them all.
	if err := storage.ReleaseBatch(ctx, q, time.Now().Add(time.Hour), got[0].ID, got[1].ID, es[3].ID); err != nil {
		t.Fatalf("ReleaseBatch(delayed) error = %v, want nil", err)
	}
	wantLen(t, q, storage.QueueLen{Delayed: 3})
	if err := storage.ReleaseBatch(ctx, q, time.Time{}); err != nil {
		t.Errorf("ReleaseBatch() of no IDs error = %v, want nil", err)
	}
}

// RunVisitedQueue runs the conformance suite of storage.PushUnvisited for a
// visited set and a queue: open returns them fresh and empty (one store, as
// sqlitestore and redisstore are, or two); the suite closes the queue.
//
// Contract checked: entries whose keys are visited are not pushed, the
// others are, in order, and the result says which; nothing is marked
// visited; keys and data of different lengths are refused with
// ErrLengthMismatch; with everything visited nothing is pushed.
func RunVisitedQueue(t *testing.T, open func(t *testing.T) (storage.Storage, storage.Queue)) {
	t.Helper()
	t.Run("PushUnvisited", func(t *testing.T) {
		st, q := open(t)
		t.Cleanup(func() { closeStore(t, q) })
		ctx := t.Context()
		if err := st.Visited(2); err != nil {
			t.Fatalf("Visited(2) error = %v", err)
		}
		if err := st.Visited(4); err != nil {
			t.Fatalf("Visited(4) error = %v", err)
		}
		keys := []uint64{1, 2, 3, 4, 1 << 63}
		data := [][]byte{[]byte("one"), []byte("two"), []byte("three"), []byte("four"), []byte("big")}
		pushed, err := storage.PushUnvisited(ctx, st, q, keys, data)
		if err != nil {
			t.Fatalf("PushUnvisited error = %v, want nil", err)
		}
		if want := []bool{true, false, true, false, true}; !slices.Equal(pushed, want) {
			t.Fatalf("PushUnvisited pushed = %v, want %v", pushed, want)
		}
		got := mustLease(t, q, 10, time.Hour)
		if want := []string{"one", "three", "big"}; !slices.Equal(datas(got), want) {
			t.Fatalf("Lease after PushUnvisited = %q, want %q", datas(got), want)
		}
		for _, k := range []uint64{1, 3, 1 << 63} {
			if seen, err := st.IsVisited(k); err != nil || seen {
				t.Errorf("IsVisited(%d) after PushUnvisited = %v, %v; want false (nothing is marked)", k, seen, err)
			}
		}
		pushed, err = storage.PushUnvisited(ctx, st, q, []uint64{2, 4}, [][]byte{[]byte("x"), []byte("y")})
		if err != nil || slices.Contains(pushed, true) {
			t.Fatalf("PushUnvisited(all visited) = %v, %v; want none pushed", pushed, err)
		}
		wantLen(t, q, storage.QueueLen{Leased: 3})
		if _, err := storage.PushUnvisited(ctx, st, q, []uint64{5}, nil); !errors.Is(err, storage.ErrLengthMismatch) {
			t.Errorf("PushUnvisited(1 key, 0 entries) error = %v, want %v", err, storage.ErrLengthMismatch)
		}
		if vp, ok := q.(storage.VisitedPusher); ok {
			if _, err := vp.PushUnvisited(ctx, []uint64{5}, nil); !errors.Is(err, storage.ErrLengthMismatch) {
				t.Errorf("native PushUnvisited(1 key, 0 entries) error = %v, want %v", err, storage.ErrLengthMismatch)
			}
		}
	})
}

// queueNotReset: pushing, leasing, acknowledging and emptying a queue is
// not a reset; a queue run would otherwise end with ErrStoreReset.
func queueNotReset(t *testing.T, q storage.Queue) {
	ctx := t.Context()
	if err := storage.CheckReset(ctx, q); err != nil {
		t.Fatalf("CheckReset() on a fresh store = %v, want nil", err)
	}
	mustPush(t, q, "a", "b")
	es := mustLease(t, q, 2, time.Minute)
	if err := q.Ack(ctx, es[0].ID, es[1].ID); err != nil {
		t.Fatal(err)
	}
	wantLen(t, q, storage.QueueLen{})
	if err := storage.CheckReset(ctx, q); err != nil {
		t.Errorf("CheckReset() on a used, empty store = %v, want nil", err)
	}
}
