package storage_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

func TestMemoryQueueLeaseExpirySynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := storage.NewMemoryQueue(0)
		defer q.Close()
		push(t, q, "a")
		<-q.Notify() // from Push
		es, err := q.Lease(ctx, 1, time.Minute)
		if err != nil {
			t.Fatalf("Lease() error = %v, want nil", err)
		}
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		select {
		case <-q.Notify():
			t.Fatalf("Notify fired before the lease expired")
		default:
		}
		if l, _ := q.Len(ctx); l != (storage.QueueLen{Leased: 1}) {
			t.Fatalf("Len() just before expiry = %+v, want Leased 1", l)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		// The timer, not a Lease or Len call, must announce the expiry.
		select {
		case <-q.Notify():
		default:
			t.Fatalf("Notify did not fire when the lease expired")
		}
		if l, _ := q.Len(ctx); l != (storage.QueueLen{Ready: 1}) {
			t.Fatalf("Len() after expiry = %+v, want Ready 1", l)
		}
		if err := q.Ack(ctx, es[0].ID); !errors.Is(err, storage.ErrUnknownLease) {
			t.Errorf("Ack(expired) error = %v, want %v", err, storage.ErrUnknownLease)
		}
		es, err = q.Lease(ctx, 1, time.Second)
		if err != nil || es[0].Deliveries != 2 {
			t.Fatalf("Lease() after expiry = %v, %v; want Deliveries 2", es, err)
		}
	})
}

func TestMemoryQueueDelayedOrderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := storage.NewMemoryQueue(0)
		defer q.Close()
		push(t, q, "a", "b", "c", "d")
		es, err := q.Lease(ctx, 3, time.Hour)
		if err != nil {
			t.Fatalf("Lease(3) error = %v, want nil", err)
		}
		start := time.Now()
		for i, d := range []time.Duration{30 * time.Second, 10 * time.Second, 20 * time.Second} {
			if err := q.Release(ctx, es[i].ID, start.Add(d)); err != nil {
				t.Fatalf("Release(%q, +%v) error = %v, want nil", es[i].Data, d, err)
			}
		}
		steps := []struct {
			at   time.Duration
			want []string
		}{
			{5 * time.Second, []string{"d"}},
			{10 * time.Second, []string{"b"}},
			{25 * time.Second, []string{"c"}},
			{30 * time.Second, []string{"a"}},
		}
		for _, s := range steps {
			time.Sleep(time.Until(start.Add(s.at)))
			got, err := q.Lease(ctx, 10, time.Hour)
			if err != nil {
				t.Fatalf("at +%v: Lease() error = %v, want nil", s.at, err)
			}
			if d := data(got); !slices.Equal(d, s.want) {
				t.Errorf("at +%v: Lease() = %q, want %q", s.at, d, s.want)
			}
		}
	})
}

func TestMemoryQueueDelayedNotifySynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := storage.NewMemoryQueue(0)
		defer q.Close()
		push(t, q, "a")
		es, _ := q.Lease(ctx, 1, time.Hour)
		if err := q.Release(ctx, es[0].ID, time.Now().Add(5*time.Second)); err != nil {
			t.Fatalf("Release() error = %v, want nil", err)
		}
		for len(q.Notify()) > 0 {
			<-q.Notify()
		}
		start := time.Now()
		<-q.Notify() // blocks until the timer promotes the entry
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("Notify after %v, want 5s", waited)
		}
	})
}

func TestMemoryQueueMaxSize(t *testing.T) {
	ctx := t.Context()
	q := storage.NewMemoryQueue(3)
	defer q.Close()
	push(t, q, "a", "b")
	if err := q.Push(ctx, []byte("c"), []byte("d")); !errors.Is(err, storage.ErrQueueFull) {
		t.Fatalf("Push(2) into 2 of 3 error = %v, want %v", err, storage.ErrQueueFull)
	}
	if l, _ := q.Len(ctx); l.Total() != 2 {
		t.Fatalf("Len() after a refused Push = %+v, want 2 entries (all or none)", l)
	}
	push(t, q, "c")
	es, err := q.Lease(ctx, 2, time.Minute)
	if err != nil {
		t.Fatalf("Lease(2) error = %v, want nil", err)
	}
	if err := q.Release(ctx, es[0].ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("Release() error = %v, want nil", err)
	}
	// Leased and delayed entries still count.
	if err := q.Push(ctx, []byte("d")); !errors.Is(err, storage.ErrQueueFull) {
		t.Fatalf("Push() with 1 ready, 1 delayed, 1 leased of 3 error = %v, want %v", err, storage.ErrQueueFull)
	}
	if err := q.Ack(ctx, es[1].ID); err != nil {
		t.Fatalf("Ack() error = %v, want nil", err)
	}
	push(t, q, "d")
	if storage.ErrQueueFull.Error() != "Queue MaxSize reached" {
		t.Errorf("ErrQueueFull text = %q, want Colly's", storage.ErrQueueFull)
	}
}

func TestMemoryQueueReleaseKeepsPosition(t *testing.T) {
	ctx := t.Context()
	q := storage.NewMemoryQueue(0)
	defer q.Close()
	push(t, q, "a", "b", "c")
	es, _ := q.Lease(ctx, 2, time.Minute)
	if err := q.Release(ctx, es[1].ID, time.Time{}); err != nil {
		t.Fatalf("Release(b) error = %v, want nil", err)
	}
	got, _ := q.Lease(ctx, 10, time.Minute)
	if d := data(got); !slices.Equal(d, []string{"b", "c"}) {
		t.Errorf("Lease() after releasing b = %q, want [b c]", d)
	}
}

func TestMemoryQueueCopiesData(t *testing.T) {
	ctx := t.Context()
	q := storage.NewMemoryQueue(0)
	defer q.Close()
	in := []byte("abc")
	if err := q.Push(ctx, in); err != nil {
		t.Fatalf("Push() error = %v, want nil", err)
	}
	in[0] = 'X'
	es, _ := q.Lease(ctx, 1, time.Minute)
	es[0].Data[1] = 'Y'
	if err := q.Release(ctx, es[0].ID, time.Time{}); err != nil {
		t.Fatalf("Release() error = %v, want nil", err)
	}
	es, _ = q.Lease(ctx, 1, time.Minute)
	if string(es[0].Data) != "abc" {
		t.Errorf("Data = %q, want abc (the queue must keep its own copy)", es[0].Data)
	}
}

func TestMemoryQueueCloseWithPendingTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := storage.NewMemoryQueue(0)
		push(t, q, "a")
		if _, err := q.Lease(t.Context(), 1, time.Second); err != nil {
			t.Fatalf("Lease() error = %v, want nil", err)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close() error = %v, want nil", err)
		}
		time.Sleep(2 * time.Second) // the timer fires on a closed queue
		if _, err := q.Len(t.Context()); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("Len() after Close error = %v, want %v", err, storage.ErrClosed)
		}
	})
}

func BenchmarkMemoryQueue(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", size), func(b *testing.B) {
			ctx := b.Context()
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			data := make([][]byte, size)
			for i := range data {
				data[i] = fmt.Appendf(nil, "https://example.com/%d", i)
			}
			if err := q.Push(ctx, data...); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				es, err := q.Lease(ctx, 1, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := q.Ack(ctx, es[0].ID); err != nil {
					b.Fatal(err)
				}
				if err := q.Push(ctx, es[0].Data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemoryQueueBatch is a queue run's pattern: the links of a page
// pushed in one call, leases and acks in batches.
func BenchmarkMemoryQueueBatch(b *testing.B) {
	const batch = 64
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", size), func(b *testing.B) {
			ctx := b.Context()
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			data := make([][]byte, size)
			for i := range data {
				data[i] = fmt.Appendf(nil, "https://example.com/%d", i)
			}
			if err := q.Push(ctx, data...); err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 0, batch)
			again := make([][]byte, 0, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				es, err := q.Lease(ctx, batch, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				ids, again = ids[:0], again[:0]
				for _, e := range es {
					ids = append(ids, e.ID)
					again = append(again, e.Data)
				}
				if err := q.Ack(ctx, ids...); err != nil {
					b.Fatal(err)
				}
				if err := q.Push(ctx, again...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemoryQueueLeaseHosts is BenchmarkMemoryQueueBatch through
// PushHosted and LeaseHosts: one host (a site crawl), or 2,000 hosts each
// set ready a Delay ahead after its lease, one lease per host at a time (a
// broad crawl).
func BenchmarkMemoryQueueLeaseHosts(b *testing.B) {
	const batch = 64
	for _, tc := range []struct {
		hosts, backlog int
	}{{1, 1_000}, {1, 100_000}, {2_000, 100_000}} {
		b.Run(fmt.Sprintf("hosts=%d/backlog=%d", tc.hosts, tc.backlog), func(b *testing.B) {
			ctx := b.Context()
			q := storage.NewMemoryQueue(0)
			defer q.Close()
			entries := make([]storage.HostEntry, tc.backlog)
			for i := range entries {
				host := fmt.Sprintf("host%d.example", i%tc.hosts)
				entries[i] = storage.HostEntry{Host: host, Data: fmt.Appendf(nil, "https://%s/%d", host, i)}
			}
			if err := q.PushHosted(ctx, entries...); err != nil {
				b.Fatal(err)
			}
			perHost := 0
			if tc.hosts > 1 {
				perHost = 1
			}
			ids := make([]string, 0, batch)
			again := make([]storage.HostEntry, 0, batch)
			ready := make(map[string]time.Time)
			const delay = 2 * time.Second
			// A virtual clock that moves as far per round as lets as many
			// hosts become ready as a batch takes.
			step := delay * batch / time.Duration(tc.hosts)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				now = now.Add(step)
				es, err := q.LeaseHosts(ctx, now, batch, perHost, time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				ids, again = ids[:0], again[:0]
				clear(ready)
				for _, e := range es {
					ids = append(ids, e.ID)
					again = append(again, storage.HostEntry{Host: e.Host, Data: e.Data})
					if tc.hosts > 1 {
						ready[e.Host] = now.Add(delay)
					}
				}
				if len(ready) > 0 {
					if err := q.SetHostReady(ctx, ready); err != nil {
						b.Fatal(err)
					}
				}
				if err := q.Ack(ctx, ids...); err != nil {
					b.Fatal(err)
				}
				if err := q.PushHosted(ctx, again...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func push(t *testing.T, q storage.Queue, data ...string) {
	t.Helper()
	bs := make([][]byte, len(data))
	for i, d := range data {
		bs[i] = []byte(d)
	}
	if err := q.Push(t.Context(), bs...); err != nil {
		t.Fatalf("Push(%q) error = %v, want nil", data, err)
	}
}

func data(es []storage.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Data)
	}
	return out
}
