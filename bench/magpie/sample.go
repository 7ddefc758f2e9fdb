package main

import (
	"context"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/storage"
)

// afterSample, when set (by tests), is called after each reading.
var afterSample func()

// sampleHeld reads, every -sample, the entries qs has leased (a queue run's
// entries in hand; qs nil for an async crawl, which has no queue) and the
// requests parked in c's politeness gate, until the function it returns is
// called, which stores the most of each in n.Held. It is how the broad
// scenario tells how much a run held beyond what its hosts could start
// (issue 39): magpie exposes both, through storage.Queue.Len and Stats.
// Without -sample it reads nothing.
func sampleHeld(ctx context.Context, n *harness.Counters, c *magpie.Collector, qs storage.Queue) (stop func()) {
	if *sampleEvery <= 0 {
		return func() {}
	}
	// Owned by the sampling goroutine until stop has waited for it.
	held := &harness.Held{MaxLeased: -1}
	if qs != nil {
		held.MaxLeased = 0
	}
	read := func() {
		if qs != nil {
			// An error (the crawl's context ended) skips the reading.
			if l, err := qs.Len(ctx); err == nil {
				held.MaxLeased = max(held.MaxLeased, int64(l.Leased))
			}
		}
		held.MaxParked = max(held.MaxParked, int64(c.Stats().Parked))
		held.Samples++
		if afterSample != nil {
			afterSample()
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(*sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				read()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		n.Held = held
	}
}
