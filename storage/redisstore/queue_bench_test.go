package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// benchEntries is the size of the single-host frontier the queue
// benchmarks run through: 200,000 pages, as bench/'s single-host scenario.
const benchEntries = 200_000

// benchData is an entry as magpie marshals a link of one host.
func benchData(i int) []byte {
	return fmt.Appendf(nil, `{"URL":"http://127.0.0.1:8080/category/sub/item-%d.html","Method":"GET","Depth":3,"Body":null,"ID":0,"Ctx":{},"Headers":null,"Host":"","CheckRevisit":true,"Parent":"http://127.0.0.1:8080/category/sub/"}`, i)
}

// benchCycle pushes benchEntries entries in batches of 10 (the links of a
// page), leases them in batches of 32 (a queue run's lease batch) and
// acknowledges each batch, reporting per entry the time of each phase and
// the server's CPU time, which a loaded machine disturbs less than the
// round trips.
func benchCycle(b *testing.B, s *Store, push func(ctx context.Context, batch [][]byte) error, lease func(ctx context.Context) ([]storage.Entry, error), ack func(ctx context.Context, ids []string) error) {
	ctx := context.Background()
	var pushT, leaseT, ackT time.Duration
	var pushS, leaseS, ackS int64
	for range b.N {
		batch := make([][]byte, 0, 10)
		srv := scriptMicros(b, s)
		start := time.Now()
		for i := range benchEntries {
			batch = append(batch, benchData(i))
			if len(batch) == cap(batch) {
				if err := push(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		pushT += time.Since(start)
		pushS += scriptMicros(b, s) - srv
		got := 0
		for got < benchEntries {
			srv = scriptMicros(b, s)
			start = time.Now()
			es, err := lease(ctx)
			if err != nil {
				b.Fatalf("lease after %d entries: %v", got, err)
			}
			leaseT += time.Since(start)
			leaseS += scriptMicros(b, s) - srv
			ids := make([]string, len(es))
			for i, e := range es {
				ids[i] = e.ID
			}
			srv = scriptMicros(b, s)
			start = time.Now()
			if err := ack(ctx, ids); err != nil {
				b.Fatal(err)
			}
			ackT += time.Since(start)
			ackS += scriptMicros(b, s) - srv
			got += len(es)
		}
	}
	per := float64(b.N * benchEntries)
	b.ReportMetric(float64(pushT.Nanoseconds())/per, "push-ns/entry")
	b.ReportMetric(float64(leaseT.Nanoseconds())/per, "lease-ns/entry")
	b.ReportMetric(float64(ackT.Nanoseconds())/per, "ack-ns/entry")
	b.ReportMetric(float64(pushS)*1000/per, "push-srv-ns/entry")
	b.ReportMetric(float64(leaseS)*1000/per, "lease-srv-ns/entry")
	b.ReportMetric(float64(ackS)*1000/per, "ack-srv-ns/entry")
	b.ReportMetric(0, "ns/op")
}

// scriptMicros is the CPU time the server has used so far (INFO cpu,
// used_cpu_user + used_cpu_sys, in µs): run the benchmarks on a server of
// their own, which nothing else uses.
func scriptMicros(b testing.TB, s *Store) int64 {
	info, err := s.rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return int64(total * 1e6)
}

// BenchmarkQueue runs 200,000 entries of one host through Push, Lease and
// Ack on one server (of its own, for the CPU figures):
//
//	MAGPIE_REDIS_ADDR=127.0.0.1:PORT go test -run XXX -bench Queue -benchtime 1x ./storage/redisstore/
func BenchmarkQueue(b *testing.B) {
	s := newTestStore(b, Options{})
	benchCycle(b, s,
		func(ctx context.Context, batch [][]byte) error { return s.Push(ctx, batch...) },
		func(ctx context.Context) ([]storage.Entry, error) { return s.Lease(ctx, 32, time.Minute) },
		func(ctx context.Context, ids []string) error { return s.Ack(ctx, ids...) })
}

// BenchmarkHostQueue is BenchmarkQueue through the host queue: the
// entries of one host pushed with PushHosted and leased with LeaseHosts
// (no per-host limit, so that batches are as large as Lease's).
func BenchmarkHostQueue(b *testing.B) {
	s := newTestStore(b, Options{})
	benchCycle(b, s,
		func(ctx context.Context, batch [][]byte) error {
			es := make([]storage.HostEntry, len(batch))
			for i, d := range batch {
				es[i] = storage.HostEntry{Host: "127.0.0.1:8080", Data: d}
			}
			return s.PushHosted(ctx, es...)
		},
		func(ctx context.Context) ([]storage.Entry, error) {
			return s.LeaseHosts(ctx, time.Now(), 32, 0, time.Minute)
		},
		func(ctx context.Context, ids []string) error { return s.Ack(ctx, ids...) })
}

// BenchmarkHostQueueBroad runs a broad crawl's frontier through the host
// queue on a virtual clock: 2,000 hosts of 10 entries each, pushed with
// PushUnvisitedHosted in batches of 60 links of many hosts, then rounds of
// what a queue run does every 40 ms at 800 pages/s: acknowledge the 32
// oldest entries in hand, store their hosts' next start (2 s on), and lease
// up to 32 entries of hosts ready within a second, at most 2 per host. It
// reports the server's CPU per entry of each call, the figure that bounds
// a crawl on a loaded machine:
//
//	MAGPIE_REDIS_ADDR=127.0.0.1:PORT go test -run XXX -bench HostQueueBroad -benchtime 1x ./storage/redisstore/
func BenchmarkHostQueueBroad(b *testing.B) {
	const hosts, perHost, batch, round = 2000, 10, 60, 32
	ctx := context.Background()
	var pushS, readyS, leaseS, ackS int64
	var leases, entries int
	for range b.N {
		s := newTestStore(b, Options{})
		keys := make([]uint64, 0, batch)
		es := make([]storage.HostEntry, 0, batch)
		flush := func() {
			srv := scriptMicros(b, s)
			if _, err := s.PushUnvisitedHosted(ctx, keys, es); err != nil {
				b.Fatal(err)
			}
			pushS += scriptMicros(b, s) - srv
			keys, es = keys[:0], es[:0]
		}
		for i := range hosts * perHost {
			h := fmt.Sprintf("127.1.%d.%d:8080", i%hosts/250, i%hosts%250)
			keys = append(keys, uint64(i))
			es = append(es, storage.HostEntry{Host: h, Data: benchData(i)})
			if len(es) == batch {
				flush()
			}
		}
		if len(es) > 0 {
			flush()
		}
		vnow := time.Now()
		var held []storage.Entry
		for done := 0; done < hosts*perHost; {
			if len(held) > 0 {
				k := min(round, len(held))
				ids := make([]string, k)
				ready := map[string]time.Time{}
				for i, e := range held[:k] {
					ids[i] = e.ID
					ready[e.Host] = vnow.Add(2 * time.Second)
				}
				held = held[k:]
				srv := scriptMicros(b, s)
				if err := s.Ack(ctx, ids...); err != nil {
					b.Fatal(err)
				}
				ackS += scriptMicros(b, s) - srv
				done += k
				srv = scriptMicros(b, s)
				if err := s.SetHostReady(ctx, ready); err != nil {
					b.Fatal(err)
				}
				readyS += scriptMicros(b, s) - srv
			}
			srv := scriptMicros(b, s)
			got, err := s.LeaseHosts(ctx, vnow.Add(time.Second), round, 2, time.Minute)
			if err != nil && !errors.Is(err, storage.ErrQueueEmpty) {
				b.Fatal(err)
			}
			leaseS += scriptMicros(b, s) - srv
			leases++
			entries += len(got)
			held = append(held, got...)
			vnow = vnow.Add(40 * time.Millisecond)
		}
	}
	per := float64(entries)
	b.ReportMetric(float64(pushS)*1000/per, "push-srv-ns/entry")
	b.ReportMetric(float64(readyS)*1000/per, "ready-srv-ns/entry")
	b.ReportMetric(float64(leaseS)*1000/per, "lease-srv-ns/entry")
	b.ReportMetric(float64(ackS)*1000/per, "ack-srv-ns/entry")
	b.ReportMetric(per/float64(leases), "entries/lease")
	b.ReportMetric(0, "ns/op")
}
