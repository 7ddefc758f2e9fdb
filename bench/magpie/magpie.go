package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/queue"
)

// magpieRule is the one rule both magpie programs set. magpie keeps a bucket
// per host inside a rule, so "*" with Parallelism 1 is per-host politeness;
// the P workers are set apart (Workers or the queue's threads).
func magpieRule(cfg harness.Config) *magpie.LimitRule {
	if !cfg.Polite {
		return &magpie.LimitRule{DomainGlob: "*", Parallelism: cfg.P}
	}
	return &magpie.LimitRule{DomainGlob: "*", Parallelism: cfg.HostPar, Delay: cfg.Delay}
}

// maxLoggedErrors is how many crawl errors a run prints to stderr.
const maxLoggedErrors = 5

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

func newMagpie(ctx context.Context, cfg harness.Config, n *harness.Counters, opts ...magpie.CollectorOption) (*magpie.Collector, error) {
	opts = append(opts, magpie.AllowedDomains(cfg.Allowed...), magpie.StdlibContext(ctx))
	c := magpie.NewCollector(opts...)
	if err := c.Limit(magpieRule(cfg)); err != nil {
		return nil, err
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(*magpie.Response) { n.Pages.Add(1) })
	c.OnError(func(r *magpie.Response, err error) {
		if refused(err) {
			return
		}
		// The first few errors go to stderr: a count alone does not say
		// whether the site, the network or a store failed.
		if n.Errors.Add(1) <= maxLoggedErrors {
			u := ""
			if r != nil && r.Request != nil && r.Request.URL != nil {
				u = r.Request.URL.String()
			}
			fmt.Fprintf(os.Stderr, "crawl-magpie: error %s: %v\n", u, err)
		}
	})
	return c, nil
}

// crawlMagpieAsync is crawlCollyAsync with magpie's import path, plus
// Workers(P), which fixes magpie's download pool at P (without it the pool
// follows the LimitRules; see crawlMagpieAsyncPorted).
func crawlMagpieAsync(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newMagpie(ctx, cfg, n, magpie.Async(true), magpie.Workers(cfg.P))
	if err != nil {
		return err
	}
	if err := c.Visit(cfg.Seed); err != nil {
		return err
	}
	c.Wait()
	return ctx.Err()
}

// crawlMagpieAsyncPorted is crawlCollyAsync with only the import path
// changed: Async and the LimitRule, no Workers option, so the download pool
// is whatever magpie makes of the rule (issue 9: it follows the limits).
func crawlMagpieAsyncPorted(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newMagpie(ctx, cfg, n, magpie.Async(true))
	if err != nil {
		return err
	}
	if err := c.Visit(cfg.Seed); err != nil {
		return err
	}
	c.Wait()
	return ctx.Err()
}

// crawlMagpieQueue runs the collector with queue.New(P, unbounded in-memory
// storage), as the Colly queue crawler does: the default MaxSize of 100,000
// would drop links in the 200,000-page run, whose frontier grows past it.
// Links found in OnHTML go through e.Request.Visit into the same frontier.
func crawlMagpieQueue(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newMagpie(ctx, cfg, n)
	if err != nil {
		return err
	}
	q, err := queue.New(cfg.P, &queue.InMemoryQueueStorage{})
	if err != nil {
		return err
	}
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	if err := q.Run(c); err != nil {
		return err
	}
	return ctx.Err()
}
