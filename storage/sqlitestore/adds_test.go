package sqlitestore

import (
	"path/filepath"
	"testing"

	"github.com/magpiecrawl/magpie/internal/queuetest"
	"github.com/magpiecrawl/magpie/storage"
)

// TestAddURLDuringRunJoinsBatch runs queuetest.AddsJoinBatch on a Store:
// AddURL from callbacks is deduplicated, checked against the visited set
// and stored with the page's links before its ack.
func TestAddURLDuringRunJoinsBatch(t *testing.T) {
	queuetest.AddsJoinBatch(t, func(t *testing.T) (storage.Queue, storage.Storage) {
		s, err := Open(filepath.Join(t.TempDir(), "crawl.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, s
	})
}
