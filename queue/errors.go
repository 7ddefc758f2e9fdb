package queue

import (
	"errors"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
)

var (
	// ErrQueueFull is returned by AddURL and AddRequest when the storage has
	// reached its maximum size. It is storage.ErrQueueFull, with Colly's text.
	ErrQueueFull = storage.ErrQueueFull
	// ErrEmpty is returned by Storage.Lease when no entry is ready. It is
	// storage.ErrQueueEmpty.
	ErrEmpty = storage.ErrQueueEmpty
	// ErrRunning is returned by Run and RunContext when the queue, or the
	// Collector given to it, is already running (Colly panics instead). It is
	// magpie.ErrRunning.
	ErrRunning = magpie.ErrRunning
	// ErrInvalidThreads is returned by New when threads is less than 1.
	ErrInvalidThreads = errors.New("queue: threads must be at least 1")
	// ErrUnsupportedStorage is returned by New when its storage is neither a
	// storage.Queue nor a Colly queue storage (CollyStorage).
	ErrUnsupportedStorage = errors.New("queue: unsupported storage")
	// ErrNilCollector is returned by Run and RunContext when given a nil Collector.
	ErrNilCollector = errors.New("queue: nil collector")
)
