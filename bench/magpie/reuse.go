//go:build !magpie_old && !magpie_noreuse

package main

import (
	"context"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
)

// The crawlers with ReuseBody (issue 29), which a tree from before the
// option does not have: build the old tree with the magpie_noreuse tag
// (issue29.sh does) or magpie_old, which leave this file out.
func init() {
	impls["magpie-async-reuse"] = profiled(crawlMagpieAsyncReuse)
	impls["magpie-async-stream-reuse"] = profiled(crawlMagpieAsyncStreamReuse)
}

// crawlMagpieAsyncReuse is crawlMagpieAsync with ReuseBody: its callbacks
// keep nothing of a page's body, so the collector reads each page into
// memory it reuses.
func crawlMagpieAsyncReuse(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlAsyncWith(ctx, cfg, n, magpie.Async(true), magpie.Workers(cfg.P), magpie.ReuseBody())
}

// crawlMagpieAsyncStreamReuse is crawlMagpieAsyncStream with ReuseBody.
func crawlMagpieAsyncStreamReuse(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlAsyncWith(ctx, cfg, n, magpie.Async(true), magpie.Workers(cfg.P), magpie.StreamHTML(), magpie.ReuseBody())
}
