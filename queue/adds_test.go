package queue_test

import (
	"testing"

	"github.com/magpiecrawl/magpie/internal/queuetest"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
)

// TestAddURLDuringRunJoinsBatch runs queuetest.AddsJoinBatch on the
// in-memory queue: AddURL from callbacks is deduplicated, checked against
// the visited set and stored with the page's links before its ack.
func TestAddURLDuringRunJoinsBatch(t *testing.T) {
	queuetest.AddsJoinBatch(t, func(*testing.T) (storage.Queue, storage.Storage) {
		return &queue.InMemoryQueueStorage{MaxSize: queue.DefaultMaxSize}, nil
	})
}
