//go:build !magpie_old

package main

import (
	"context"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/queue"
)

// The crawlers with StreamHTML (issue 20), which a tree from before the
// option does not have: run.sh builds the old tree's crawler with the
// magpie_old tag, which leaves this file out.
func init() {
	impls["magpie-async-stream"] = profiled(crawlMagpieAsyncStream)
	impls["magpie-queue-add-stream"] = profiled(crawlMagpieQueueAddStream)
}

// crawlMagpieAsyncStream is crawlMagpieAsync with StreamHTML: its one
// selector, a[href], is matched while each page is tokenized.
func crawlMagpieAsyncStream(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlAsyncWith(ctx, cfg, n, magpie.Async(true), magpie.Workers(cfg.P), magpie.StreamHTML())
}

// crawlMagpieQueueAddStream is crawlMagpieQueueAdd with StreamHTML.
func crawlMagpieQueueAddStream(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlQueueAddOn(ctx, cfg, n, &queue.InMemoryQueueStorage{}, nil, magpie.StreamHTML())
}
