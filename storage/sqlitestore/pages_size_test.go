package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// BenchmarkPagesSize reports the file bytes a page state costs (bytes/url):
// 200,000 documentation-like pages, checkpointed and measured on disk.
func BenchmarkPagesSize(b *testing.B) {
	const n = 200_000
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "pages.db")
		s, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		empty := fileSize(b, s, path)
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
		b.ReportMetric(float64(fileSize(b, s, path)-empty)/n, "bytes/url")
		s.Close()
	}
}

// fileSize checkpoints the WAL into the file and returns the file's size.
func fileSize(b *testing.B, s *Store, path string) int64 {
	b.Helper()
	if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
