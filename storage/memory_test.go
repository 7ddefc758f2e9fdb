package storage_test

import (
	"testing"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
)

func TestMemoryQueueConformance(t *testing.T) {
	storagetest.RunQueue(t, func(*testing.T) storage.Queue { return storage.NewMemoryQueue(0) })
}

func TestInMemoryStorageVisited(t *testing.T) {
	storagetest.RunVisited(t, func(*testing.T) storage.VisitedSet { return &storage.InMemoryStorage{} })
}

func TestInMemoryStoragePages(t *testing.T) {
	storagetest.RunPages(t, func(*testing.T) storage.PageStore { return &storage.InMemoryStorage{} })
}

func TestInMemoryStorageCookies(t *testing.T) {
	storagetest.RunCookies(t, func(*testing.T) storage.CookieStore { return &storage.InMemoryStorage{} })
}

func TestMemoryVisitedQueueConformance(t *testing.T) {
	storagetest.RunVisitedQueue(t, func(*testing.T) (storage.Storage, storage.Queue) {
		return &storage.InMemoryStorage{}, storage.NewMemoryQueue(0)
	})
}

func TestMemoryQueueHostConformance(t *testing.T) {
	storagetest.RunHostQueue(t, func(*testing.T) storage.HostQueue { return storage.NewMemoryQueue(0) })
}
