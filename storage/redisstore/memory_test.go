package redisstore

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestVisitedMemory measures the server memory per visited ID. It adds a
// million random IDs, so it runs only with MAGPIE_REDIS_MEMTEST=1:
//
//	MAGPIE_REDIS_MEMTEST=1 go test -run VisitedMemory -v ./storage/redisstore/
func TestVisitedMemory(t *testing.T) {
	if os.Getenv("MAGPIE_REDIS_MEMTEST") == "" {
		t.Skip("set MAGPIE_REDIS_MEMTEST=1 to measure visited-set memory (adds 1,000,000 IDs)")
	}
	ctx := context.Background()
	s := newTestStore(t, Options{})
	const total, batch = 1_000_000, 10_000
	before := usedMemory(t, s)
	ids := make([]uint64, batch)
	for done := 0; done < total; done += batch {
		for i := range ids {
			ids[i] = rand.Uint64()
		}
		if _, err := s.AddVisited(ctx, ids...); err != nil {
			t.Fatal(err)
		}
	}
	after := usedMemory(t, s)
	var keys, sum int64
	encodings := map[string]int{}
	for shard := range s.shards {
		key := s.prefix + ":v:" + strconv.FormatUint(shard, 10)
		n, err := s.rdb.MemoryUsage(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		enc, err := s.rdb.ObjectEncoding(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		encodings[enc]++
		keys++
		sum += n
	}
	t.Logf("%d IDs in %d shards %v: MEMORY USAGE sum %d bytes = %.2f bytes/ID; used_memory delta %d bytes = %.2f bytes/ID",
		total, keys, encodings, sum, float64(sum)/total, after-before, float64(after-before)/total)

	// For comparison, Colly's redisstorage layout: one key per URL.
	const colly = 100_000
	before = usedMemory(t, s)
	p := s.rdb.Pipeline()
	for i := range colly {
		p.Set(ctx, s.prefix+":request:"+strconv.FormatUint(rand.Uint64(), 10), "1", 0)
		if i%batch == batch-1 {
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	after = usedMemory(t, s)
	t.Logf("Colly layout (SET prefix:request:<id> 1), %d IDs: used_memory delta %.2f bytes/ID", colly, float64(after-before)/colly)
}

func usedMemory(t *testing.T, s *Store) int64 {
	t.Helper()
	info, err := s.rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}
