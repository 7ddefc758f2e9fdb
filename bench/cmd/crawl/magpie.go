//go:build magpie

// The magpie crawlers compile only once the library has NewCollector; until
// then build with -tags magpie to try them. Remove the tag when it lands.

package main

import (
	"context"
	"errors"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

func init() {
	impls["magpie-async"] = crawlMagpieAsync
	impls["magpie-queue"] = crawlMagpieQueue
}

// magpieRule is the one rule both magpie programs set. magpie keeps a bucket
// per host inside a rule, so "*" with Parallelism 1 is per-host politeness,
// and TotalParallelism caps the whole crawl at P workers.
func magpieRule(cfg config) *magpie.LimitRule {
	if !cfg.polite {
		return &magpie.LimitRule{DomainGlob: "*", Parallelism: cfg.p}
	}
	return &magpie.LimitRule{DomainGlob: "*", Parallelism: cfg.hostPar, Delay: cfg.delay, TotalParallelism: cfg.p}
}

// refused reports whether err is an admission refusal (revisit, foreign
// domain, robots.txt, ...) rather than a failed fetch. magpie reports those to
// OnError too; Colly does not, so they are not counted as errors.
func refused(err error) bool {
	var av *magpie.AlreadyVisitedError
	return errors.As(err, &av) ||
		errors.Is(err, magpie.ErrForbiddenDomain) ||
		errors.Is(err, magpie.ErrForbiddenURL) ||
		errors.Is(err, magpie.ErrNoURLFiltersMatch) ||
		errors.Is(err, magpie.ErrRobotsTxtBlocked) ||
		errors.Is(err, magpie.ErrMaxDepth)
}

func newMagpie(ctx context.Context, cfg config, n *counters, opts ...magpie.CollectorOption) (*magpie.Collector, error) {
	opts = append(opts, magpie.AllowedDomains(cfg.allowed...), magpie.StdlibContext(ctx))
	c := magpie.NewCollector(opts...)
	if err := c.Limit(magpieRule(cfg)); err != nil {
		return nil, err
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(*magpie.Response) { n.pages.Add(1) })
	c.OnError(func(_ *magpie.Response, err error) {
		if !refused(err) {
			n.errors.Add(1)
		}
	})
	return c, nil
}

func crawlMagpieAsync(ctx context.Context, cfg config, n *counters) error {
	c, err := newMagpie(ctx, cfg, n, magpie.Async(true))
	if err != nil {
		return err
	}
	if err := c.Visit(cfg.seed); err != nil {
		return err
	}
	c.Wait()
	return ctx.Err()
}

func crawlMagpieQueue(ctx context.Context, cfg config, n *counters) error {
	c, err := newMagpie(ctx, cfg, n)
	if err != nil {
		return err
	}
	q, err := queue.New(cfg.p, nil)
	if err != nil {
		return err
	}
	if err := q.AddURL(cfg.seed); err != nil {
		return err
	}
	if err := q.Run(c); err != nil {
		return err
	}
	return ctx.Err()
}
