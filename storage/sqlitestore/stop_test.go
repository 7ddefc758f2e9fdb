package sqlitestore

import (
	"path/filepath"
	"testing"

	"github.com/magpiecrawl/magpie/internal/queuetest"
	"github.com/magpiecrawl/magpie/storage"
)

// TestStdlibContextStopsQueueRun runs queuetest.StopsOnContext on a crawl
// file: a cancelled or expired StdlibContext ends a run of 1,000 entries
// behind a 1 s Delay within 2 s, and all 1,000 stay in the file.
func TestStdlibContextStopsQueueRun(t *testing.T) {
	queuetest.StopsOnContext(t, func(t *testing.T) (storage.Queue, storage.Storage) {
		s, err := Open(filepath.Join(t.TempDir(), "crawl.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, s
	})
}
