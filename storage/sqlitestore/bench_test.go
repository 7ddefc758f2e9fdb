package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// BenchmarkQueue measures one Push of a batch, then Lease and Ack of the
// same entries in batches, per entry.
func BenchmarkQueue(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, _ := openTest(b)
			ctx := context.Background()
			data := make([][]byte, batch)
			for i := range data {
				data[i] = make([]byte, 200) // about a marshalled Request
			}
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				if err := s.Push(ctx, data...); err != nil {
					b.Fatal(err)
				}
				es, err := s.Lease(ctx, batch, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				ids := make([]string, len(es))
				for i, e := range es {
					ids[i] = e.ID
				}
				if err := s.Ack(ctx, ids...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAddVisited measures AddVisited per ID, in batches.
func BenchmarkAddVisited(b *testing.B) {
	for _, batch := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, _ := openTest(b)
			ctx := context.Background()
			ids := make([]uint64, batch)
			var next uint64
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				for i := range ids {
					next += 0x9E3779B97F4A7C15 // spread IDs like hashes
					ids[i] = next
				}
				if _, err := s.AddVisited(ctx, ids...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQueueBacklog pushes 200,000 entries in batches of 100 (the links
// of a page) and drains them with Lease and Ack in batches of 32, as a
// single-host queue run of 200,000 pages does; it reports the cost per
// entry of each phase.
func BenchmarkQueueBacklog(b *testing.B) {
	const total, pushBatch, leaseBatch = 200_000, 100, 32
	data := make([][]byte, pushBatch)
	for i := range data {
		data[i] = make([]byte, 200)
	}
	ctx := context.Background()
	var push, drain time.Duration
	for b.Loop() {
		b.StopTimer()
		s, _ := openTest(b)
		b.StartTimer()
		start := time.Now()
		for range total / pushBatch {
			if err := s.Push(ctx, data...); err != nil {
				b.Fatal(err)
			}
		}
		mid := time.Now()
		for got := 0; got < total; {
			es, err := s.Lease(ctx, leaseBatch, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, len(es))
			for i, e := range es {
				ids[i] = e.ID
			}
			if err := s.Ack(ctx, ids...); err != nil {
				b.Fatal(err)
			}
			got += len(es)
		}
		push += mid.Sub(start)
		drain += time.Since(mid)
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(push.Nanoseconds())/float64(b.N*total), "push-ns/entry")
	b.ReportMetric(float64(drain.Nanoseconds())/float64(b.N*total), "lease+ack-ns/entry")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkHostQueueBacklog is BenchmarkQueueBacklog through the host-aware
// queue: entries pushed with PushHosted in batches of 100 and drained with
// LeaseHosts and Ack. With one host (200,000 entries, 32 leased at a time,
// as a single-host queue run with Parallelism 32), and with many hosts
// (2,000 × 50 and 20,000 × 5, one lease per host at a time, each host set
// ready 200 ms after its lease on a clock that moves 1 ms per LeaseHosts,
// as a broad crawl with a Delay), where most hosts wait at any time.
func BenchmarkHostQueueBacklog(b *testing.B) {
	for _, c := range []struct {
		hosts, perHost, total int
	}{{1, 32, 200_000}, {2_000, 1, 100_000}, {20_000, 1, 100_000}} {
		b.Run(fmt.Sprintf("hosts=%d", c.hosts), func(b *testing.B) {
			benchHostBacklog(b, c.hosts, c.perHost, c.total)
		})
	}
}

func benchHostBacklog(b *testing.B, hosts, perHost, total int) {
	const pushBatch = 100
	names := make([]string, hosts)
	for i := range names {
		names[i] = fmt.Sprintf("www.host-%05d.example.com", i)
	}
	ctx := context.Background()
	var push, drain time.Duration
	for b.Loop() {
		b.StopTimer()
		s, _ := openTest(b)
		b.StartTimer()
		start := time.Now()
		batch := make([]storage.HostEntry, pushBatch)
		for i := 0; i < total; i += pushBatch {
			for j := range batch {
				batch[j] = storage.HostEntry{Host: names[(i+j)%hosts], Data: make([]byte, 200)}
			}
			if err := s.PushHosted(ctx, batch...); err != nil {
				b.Fatal(err)
			}
		}
		mid := time.Now()
		now := mid
		for got := 0; got < total; now = now.Add(time.Millisecond) {
			es, err := s.LeaseHosts(ctx, now, 32, perHost, time.Hour)
			if errors.Is(err, storage.ErrQueueEmpty) {
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, len(es))
			ready := make(map[string]time.Time, len(es))
			for i, e := range es {
				ids[i] = e.ID
				ready[e.Host] = now.Add(200 * time.Millisecond)
			}
			if hosts > 1 {
				if err := s.SetHostReady(ctx, ready); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Ack(ctx, ids...); err != nil {
				b.Fatal(err)
			}
			got += len(es)
		}
		push += mid.Sub(start)
		drain += time.Since(mid)
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(push.Nanoseconds())/float64(b.N*total), "push-ns/entry")
	b.ReportMetric(float64(drain.Nanoseconds())/float64(b.N*total), "lease+ack-ns/entry")
	b.ReportMetric(0, "ns/op")
}
