package redisstore

import (
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
)

func TestConformance(t *testing.T) {
	redisAddr(t)
	storagetest.RunQueue(t, func(t *testing.T) storage.Queue { return newTestStore(t, Options{}) })
	storagetest.RunHostQueue(t, func(t *testing.T) storage.HostQueue { return newTestStore(t, Options{}) })
	storagetest.RunVisited(t, func(t *testing.T) storage.VisitedSet { return newTestStore(t, Options{}) })
	storagetest.RunPages(t, func(t *testing.T) storage.PageStore { return newTestStore(t, Options{}) })
	storagetest.RunCookies(t, func(t *testing.T) storage.CookieStore { return newTestStore(t, Options{}) })
	storagetest.RunVisitedQueue(t, func(t *testing.T) (storage.Storage, storage.Queue) {
		s := newTestStore(t, Options{})
		return s, s
	})

	// The suite's path names a crawl: here it maps to one key prefix, the
	// same on reopen.
	var mu sync.Mutex
	prefixes := map[string]string{}
	reopen := func(t *testing.T, path string) *Store {
		mu.Lock()
		p, ok := prefixes[path]
		if !ok {
			p = randomPrefix()
			prefixes[path] = p
		}
		mu.Unlock()
		return newTestStore(t, Options{Prefix: p})
	}
	storagetest.RunQueueReopen(t, func(t *testing.T, path string) storage.Queue { return reopen(t, path) })
	storagetest.RunHostQueueReopen(t, func(t *testing.T, path string) storage.HostQueue { return reopen(t, path) })
}
