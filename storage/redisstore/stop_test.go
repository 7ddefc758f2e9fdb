package redisstore

import (
	"testing"

	"github.com/magpiecrawl/magpie/internal/queuetest"
	"github.com/magpiecrawl/magpie/storage"
)

// TestStdlibContextStopsQueueRun runs queuetest.StopsOnContext on Redis: a
// cancelled or expired StdlibContext ends a run of 1,000 entries behind a
// 1 s Delay within 2 s, and all 1,000 stay in Redis.
func TestStdlibContextStopsQueueRun(t *testing.T) {
	queuetest.StopsOnContext(t, func(t *testing.T) (storage.Queue, storage.Storage) {
		s := newTestStore(t, Options{})
		return s, s
	})
}
