package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
)

func openSuite(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "suite.db"))
	if err != nil {
		t.Fatalf("Open error = %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.RunQueue(t, func(t *testing.T) storage.Queue { return openSuite(t) })
	storagetest.RunVisited(t, func(t *testing.T) storage.VisitedSet {
		s := openSuite(t)
		t.Cleanup(func() { s.Close() })
		return s
	})
	storagetest.RunPages(t, func(t *testing.T) storage.PageStore {
		s := openSuite(t)
		t.Cleanup(func() { s.Close() })
		return s
	})
	storagetest.RunCookies(t, func(t *testing.T) storage.CookieStore {
		s := openSuite(t)
		t.Cleanup(func() { s.Close() })
		return s
	})
	storagetest.RunVisitedQueue(t, func(t *testing.T) (storage.Storage, storage.Queue) {
		s := openSuite(t)
		return s, s
	})
	storagetest.RunQueueReopen(t, func(t *testing.T, path string) storage.Queue {
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open(%q) error = %v", path, err)
		}
		return s
	})
}

func TestConformanceHostQueue(t *testing.T) {
	storagetest.RunHostQueue(t, func(t *testing.T) storage.HostQueue { return openSuite(t) })
	// The options that change a push's transaction: a size check and the
	// purge of expired visited marks.
	t.Run("WithOptions", func(t *testing.T) {
		storagetest.RunHostQueue(t, func(t *testing.T) storage.HostQueue {
			s, err := Open(filepath.Join(t.TempDir(), "suite.db"), WithMaxSize(1000), WithVisitedTTL(time.Hour))
			if err != nil {
				t.Fatalf("Open error = %v", err)
			}
			return s
		})
	})
	storagetest.RunHostQueueReopen(t, func(t *testing.T, path string) storage.HostQueue {
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open(%q) error = %v", path, err)
		}
		return s
	})
}
