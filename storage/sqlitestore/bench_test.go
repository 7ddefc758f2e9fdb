package sqlitestore

import (
	"context"
	"fmt"
	"testing"
	"time"
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
