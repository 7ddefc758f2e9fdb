package queue

import (
	"context"
	"errors"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
)

// TEMPORARY: until branch collector lands Collector.RunQueue and
// Request.Marshal, they are reached through interfaces so this package builds.

func runQueue(ctx context.Context, c *magpie.Collector, s storage.Queue, threads int) error {
	r, ok := any(c).(interface {
		RunQueue(context.Context, storage.Queue, int) error
	})
	if !ok {
		return errors.New("queue: Collector.RunQueue not available yet")
	}
	return r.RunQueue(ctx, s, threads)
}

func marshal(r *magpie.Request) ([]byte, error) {
	m, ok := any(r).(interface{ Marshal() ([]byte, error) })
	if !ok {
		return nil, errors.New("queue: Request.Marshal not available yet")
	}
	return m.Marshal()
}
