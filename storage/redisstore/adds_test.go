package redisstore

import (
	"testing"

	"github.com/magpiecrawl/magpie/internal/queuetest"
	"github.com/magpiecrawl/magpie/storage"
)

// TestAddURLDuringRunJoinsBatch runs queuetest.AddsJoinBatch on a Store:
// AddURL from callbacks is deduplicated, checked against the visited set
// and stored with the page's links before its ack.
func TestAddURLDuringRunJoinsBatch(t *testing.T) {
	queuetest.AddsJoinBatch(t, func(t *testing.T) (storage.Queue, storage.Storage) {
		s := newTestStore(t, Options{})
		return s, s
	})
}
