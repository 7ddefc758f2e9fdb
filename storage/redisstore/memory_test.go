package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
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

// TestClusterVisitedMemory is TestVisitedMemory on the cluster: a million
// random IDs spread over the visited shards of every master. The bytes are
// the masters'; each replica holds as much again. Run it with
// MAGPIE_REDIS_MEMTEST=1 and MAGPIE_REDIS_CLUSTER_ADDRS set.
func TestClusterVisitedMemory(t *testing.T) {
	if os.Getenv("MAGPIE_REDIS_MEMTEST") == "" {
		t.Skip("set MAGPIE_REDIS_MEMTEST=1 to measure visited-set memory (adds 1,000,000 IDs)")
	}
	ctx := context.Background()
	s := newClusterStore(t, Options{})
	cc := s.rdb.(*redis.ClusterClient)
	masters := func() int64 {
		var mu sync.Mutex
		var sum int64
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n := usedMemoryOf(t, c)
			mu.Lock()
			sum += n
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	const total, batch = 1_000_000, 10_000
	before := masters()
	ids := make([]uint64, batch)
	for done := 0; done < total; done += batch {
		for i := range ids {
			ids[i] = rand.Uint64()
		}
		if _, err := s.AddVisited(ctx, ids...); err != nil {
			t.Fatal(err)
		}
	}
	after := masters()
	var sum int64
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
		sum += n
	}
	t.Logf("cluster: %d IDs in %d shards %v over the masters: MEMORY USAGE sum %d bytes = %.2f bytes/ID; masters' used_memory delta %d bytes = %.2f bytes/ID (each replica holds as much again)",
		total, s.shards, encodings, sum, float64(sum)/total, after-before, float64(after-before)/total)

	// The frontier: entries as magpie marshals a link found on a page.
	const entries = 200_000
	before = masters()
	data := make([][]byte, 1000)
	size := 0
	for done := 0; done < entries; done += len(data) {
		for i := range data {
			h, n := rand.IntN(1000), rand.IntN(1e9)
			data[i] = fmt.Appendf(nil, `{"URL":"https://h%d.example.com/category/sub/item-%d.html","Method":"GET","Depth":3,"Body":null,"ID":0,"Ctx":{},"Headers":null,"Host":"","CheckRevisit":true,"Parent":"https://h%d.example.com/category/sub/"}`, h, n, h)
			size += len(data[i])
		}
		if err := s.Push(ctx, data...); err != nil {
			t.Fatal(err)
		}
	}
	after = masters()
	t.Logf("cluster: %d queued entries of %d bytes on average: masters' used_memory delta %d bytes = %.1f bytes/entry",
		entries, size/entries, after-before, float64(after-before)/entries)
}

func usedMemoryOf(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
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
