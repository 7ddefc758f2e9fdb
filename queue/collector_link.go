package queue

import (
	"context"
	"errors"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
)

// TEMPORARY: until branch collector lands Collector.RunQueue, it is reached
// through an interface so that this package builds.

func runQueue(ctx context.Context, c *magpie.Collector, s storage.Queue, threads int) error {
	r, ok := any(c).(interface {
		RunQueue(context.Context, storage.Queue, int) error
	})
	if !ok {
		return errors.New("queue: Collector.RunQueue not available yet")
	}
	return r.RunQueue(ctx, s, threads)
}

func marshal(r *magpie.Request) ([]byte, error) { return r.Marshal() }
