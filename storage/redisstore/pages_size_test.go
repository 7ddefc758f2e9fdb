package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// BenchmarkPagesSize reports the server memory a page state costs
// (bytes/url, from INFO memory's used_memory): 200,000 documentation-like
// pages in the default 4096 shards.
func BenchmarkPagesSize(b *testing.B) {
	const n = 200_000
	for b.Loop() {
		s := newTestStore(b, Options{})
		before := serverMemory(b, s)
		now := time.Now()
		batch := make([]storage.Page, 0, 1000)
		for i := range n {
			batch = append(batch, storage.Page{ID: uint64(i)*0x9e3779b97f4a7c15 + 1, State: storage.PageState{
				URL:     fmt.Sprintf("https://www.postgresql.org/docs/17/functions-section-%07d.html", i),
				Fetched: now, Status: 200, ETag: fmt.Sprintf(`"65f1c2a8-%x"`, 10000+i%50000),
				LastModified: now.Add(-time.Hour), Digest: uint64(i) * 31, Due: now.Add(24 * time.Hour), Interval: 24 * time.Hour, Change: 1,
			}})
			if len(batch) == cap(batch) {
				if err := s.PutPages(b.Context(), batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		b.ReportMetric(float64(serverMemory(b, s)-before)/n, "bytes/url")
	}
}

func serverMemory(b *testing.B, s *Store) int64 {
	b.Helper()
	info, err := s.rdb.Info(b.Context(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}
