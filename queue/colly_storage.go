package queue

import (
	"context"
	"time"
)

// collyLease is how long GetRequest's internal lease lasts; the entry is
// acknowledged at once, so it only has to outlive that call.
const collyLease = time.Minute

// The methods below give InMemoryQueueStorage Colly's queue-storage API
// (AddRequest, GetRequest, QueueSize; Init is beside Push), so that code
// written against Colly's in-memory storage compiles and runs. The queue's
// own Run uses Push, Lease and Ack, which guarantee at-least-once delivery;
// these give Colly's at-most-once.
var _ CollyStorage = (*InMemoryQueueStorage)(nil)

// AddRequest appends a marshalled request, as Colly's does. It returns
// storage.ErrQueueFull when MaxSize requests are stored.
func (s *InMemoryQueueStorage) AddRequest(r []byte) error {
	return s.queue().Push(context.Background(), r)
}

// GetRequest removes and returns the oldest ready request. Unlike Colly's,
// which returns nil, nil, an empty storage returns ErrEmpty, so a caller can
// tell an empty queue from an empty payload.
func (s *InMemoryQueueStorage) GetRequest() ([]byte, error) {
	ctx := context.Background()
	q := s.queue()
	entries, err := q.Lease(ctx, 1, collyLease)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, ErrEmpty
	}
	if err := q.Ack(ctx, entries[0].ID); err != nil {
		return nil, err
	}
	return entries[0].Data, nil
}

// QueueSize counts the requests not yet done: ready, delayed, and those a
// running Queue holds.
func (s *InMemoryQueueStorage) QueueSize() (int, error) {
	l, err := s.queue().Len(context.Background())
	if err != nil {
		return 0, err
	}
	return l.Total(), nil
}
