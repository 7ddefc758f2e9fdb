package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// InMemoryQueueStorage is Colly's in-memory queue storage, here a
// storage.Queue, storage.HostQueue and storage.QueueNotifier backed by
// storage.MemoryQueue. Colly programs keep writing
// &queue.InMemoryQueueStorage{MaxSize: 10000}.
//
// MaxSize caps the requests not yet done (pending and in flight); 0 means no
// limit; it is read on first use and later changes have no effect. The zero
// value is an unlimited queue. Safe for concurrent use; must not be copied
// after first use. Close drops the entries; closing is optional.
type InMemoryQueueStorage struct {
	// MaxSize is the most requests the storage holds; 0 means no limit.
	MaxSize int

	once sync.Once
	q    *storage.MemoryQueue
}

var (
	_ storage.Queue         = (*InMemoryQueueStorage)(nil)
	_ storage.HostQueue     = (*InMemoryQueueStorage)(nil)
	_ storage.QueueNotifier = (*InMemoryQueueStorage)(nil)
	_ storage.LeaseRenewer  = (*InMemoryQueueStorage)(nil)
	_ storage.BatchReleaser = (*InMemoryQueueStorage)(nil)
)

func (s *InMemoryQueueStorage) queue() *storage.MemoryQueue {
	s.once.Do(func() { s.q = storage.NewMemoryQueue(s.MaxSize) })
	return s.q
}

// Init exists for Colly compatibility; it prepares the storage and cannot fail.
func (s *InMemoryQueueStorage) Init() error {
	s.queue()
	return nil
}

// Push implements storage.Queue.
func (s *InMemoryQueueStorage) Push(ctx context.Context, data ...[]byte) error {
	return s.queue().Push(ctx, data...)
}

// Lease implements storage.Queue.
func (s *InMemoryQueueStorage) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	return s.queue().Lease(ctx, n, ttl)
}

// Ack implements storage.Queue.
func (s *InMemoryQueueStorage) Ack(ctx context.Context, ids ...string) error {
	return s.queue().Ack(ctx, ids...)
}

// Release implements storage.Queue.
func (s *InMemoryQueueStorage) Release(ctx context.Context, id string, notBefore time.Time) error {
	return s.queue().Release(ctx, id, notBefore)
}

// Len implements storage.Queue.
func (s *InMemoryQueueStorage) Len(ctx context.Context) (storage.QueueLen, error) {
	return s.queue().Len(ctx)
}

// PushHosted implements storage.HostQueue.
func (s *InMemoryQueueStorage) PushHosted(ctx context.Context, entries ...storage.HostEntry) error {
	return s.queue().PushHosted(ctx, entries...)
}

// LeaseHosts implements storage.HostQueue.
func (s *InMemoryQueueStorage) LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	return s.queue().LeaseHosts(ctx, now, n, perHost, ttl)
}

// SetHostReady implements storage.HostQueue.
func (s *InMemoryQueueStorage) SetHostReady(ctx context.Context, ready map[string]time.Time) error {
	return s.queue().SetHostReady(ctx, ready)
}

// Head implements storage.HostQueue.
func (s *InMemoryQueueStorage) Head(ctx context.Context, n int) ([]storage.HeadEntry, error) {
	return s.queue().Head(ctx, n)
}

// Renew implements storage.LeaseRenewer.
func (s *InMemoryQueueStorage) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	return s.queue().Renew(ctx, ttl, ids...)
}

// ReleaseBatch implements storage.BatchReleaser.
func (s *InMemoryQueueStorage) ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error {
	return s.queue().ReleaseBatch(ctx, notBefore, ids...)
}

// Notify implements storage.QueueNotifier.
func (s *InMemoryQueueStorage) Notify() <-chan struct{} { return s.queue().Notify() }

// Close drops every entry; later calls return storage.ErrClosed.
func (s *InMemoryQueueStorage) Close() error { return s.queue().Close() }

// CollyStorage is Colly's queue storage interface (queue.Storage in Colly).
// Implementations must be safe for concurrent use; the payload is a
// marshalled request.
type CollyStorage interface {
	// Init prepares the storage.
	Init() error
	// AddRequest appends a request.
	AddRequest([]byte) error
	// GetRequest removes and returns the oldest request. Colly's in-memory
	// storage returns nil, nil when empty; others return an error.
	GetRequest() ([]byte, error)
	// QueueSize counts the stored requests.
	QueueSize() (int, error)
}

// FromColly adapts a Colly queue storage to storage.Queue.
//
// The guarantee is weaker than a native storage.Queue: at most once. Colly's
// GetRequest removes a request for good, so a leased request lives only in
// this process's memory until Ack; a crash, or Close with requests leased,
// released or not yet due, loses them. Within the process, leases still
// expire and come back, Release and not-before work, and Deliveries count.
// Push of several entries is not atomic: it stops at the first AddRequest
// error. Init is called by New (queue.New calls any Init() error method).
// The returned queue does not implement storage.QueueNotifier, since requests
// can arrive in s from elsewhere; consumers poll it. Close does not close s.
func FromColly(s CollyStorage) storage.Queue {
	return &collyQueue{s: s, local: storage.NewMemoryQueue(0)}
}

// collyQueue keeps leased, released and delayed entries in local, and pulls
// new entries from s only when local has too few ready.
type collyQueue struct {
	s CollyStorage
	// pullMu serialises pulls from s so that QueueSize and GetRequest agree
	// within this process.
	pullMu sync.Mutex
	local  *storage.MemoryQueue
}

func (q *collyQueue) Init() error { return q.s.Init() }

func (q *collyQueue) Push(ctx context.Context, data ...[]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := q.local.Len(ctx); err != nil {
		return err // closed
	}
	for i, d := range data {
		if err := q.s.AddRequest(d); err != nil {
			return fmt.Errorf("queue: colly storage: AddRequest %d of %d: %w", i+1, len(data), err)
		}
	}
	return nil
}

func (q *collyQueue) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	if n <= 0 || ttl <= 0 {
		return q.local.Lease(ctx, n, ttl) // reports the argument error
	}
	l, err := q.local.Len(ctx)
	if err != nil {
		return nil, err
	}
	if want := n - l.Ready; want > 0 {
		if err := q.pull(ctx, want); err != nil {
			return nil, err
		}
	}
	return q.local.Lease(ctx, n, ttl)
}

// pull moves up to want requests from s into local.
func (q *collyQueue) pull(ctx context.Context, want int) error {
	q.pullMu.Lock()
	defer q.pullMu.Unlock()
	size, err := q.s.QueueSize()
	if err != nil {
		return fmt.Errorf("queue: colly storage: QueueSize: %w", err)
	}
	var got [][]byte
	for range min(want, size) {
		d, err := q.s.GetRequest()
		if err != nil {
			// Another consumer of a shared storage may have taken the
			// last request between QueueSize and GetRequest: that is empty.
			if n, serr := q.s.QueueSize(); serr == nil && n == 0 {
				break
			}
			if len(got) > 0 {
				break // hand out what was taken; the error will recur
			}
			return fmt.Errorf("queue: colly storage: GetRequest: %w", err)
		}
		if d == nil {
			break
		}
		got = append(got, d)
	}
	if len(got) == 0 {
		return nil
	}
	return q.local.Push(ctx, got...)
}

func (q *collyQueue) Ack(ctx context.Context, ids ...string) error {
	return q.local.Ack(ctx, ids...)
}

func (q *collyQueue) Release(ctx context.Context, id string, notBefore time.Time) error {
	return q.local.Release(ctx, id, notBefore)
}

// Renew implements storage.LeaseRenewer: leased requests live in local.
func (q *collyQueue) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	return q.local.Renew(ctx, ttl, ids...)
}

func (q *collyQueue) ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error {
	return q.local.ReleaseBatch(ctx, notBefore, ids...)
}

func (q *collyQueue) Len(ctx context.Context) (storage.QueueLen, error) {
	l, err := q.local.Len(ctx)
	if err != nil {
		return l, err
	}
	size, err := q.s.QueueSize()
	if err != nil {
		return storage.QueueLen{}, fmt.Errorf("queue: colly storage: QueueSize: %w", err)
	}
	l.Ready += size
	return l, nil
}

func (q *collyQueue) Close() error {
	if err := q.local.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
		return err
	}
	return nil
}
