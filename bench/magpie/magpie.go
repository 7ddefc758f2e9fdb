package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
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
		errors.Is(err, magpie.ErrMaxDepth) ||
		errors.Is(err, magpie.ErrMaxRequests)
}

// newMagpie returns the collector every magpie crawler runs: links found
// in OnHTML go through e.Request.Visit.
func newMagpie(ctx context.Context, cfg harness.Config, n *harness.Counters, opts ...magpie.CollectorOption) (*magpie.Collector, error) {
	return newMagpieLinks(ctx, cfg, n, func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	}, opts...)
}

// newMagpieLinks is newMagpie with onLink called for every a[href] instead.
// The options of -max-requests, -prioritize and -politeness (order.go) come
// after opts.
func newMagpieLinks(ctx context.Context, cfg harness.Config, n *harness.Counters, onLink func(*magpie.HTMLElement), opts ...magpie.CollectorOption) (*magpie.Collector, error) {
	flagged, err := orderOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, flagged...)
	opts = append(opts, magpie.AllowedDomains(cfg.Allowed...), magpie.StdlibContext(ctx))
	c := magpie.NewCollector(opts...)
	if err := c.Limit(magpieRule(cfg)); err != nil {
		return nil, err
	}
	c.OnHTML("a[href]", onLink)
	c.OnResponse(func(*magpie.Response) { stopAt(ctx, n.Pages.Add(1)) })
	c.OnError(func(r *magpie.Response, err error) {
		// A fetch cut short by the crawl's end (-stop-after, or the
		// timeout, which the result line reports) did not fail.
		if refused(err) || (ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			return
		}
		u := ""
		if r != nil && r.Request != nil && r.Request.URL != nil {
			u = r.Request.URL.String()
		}
		countError(n, u, err)
	})
	return c, nil
}

// countError counts a failed fetch or a failed queue push. The first few
// go to stderr: a count alone does not say whether the site, the network
// or a store failed.
func countError(n *harness.Counters, u string, err error) {
	if n.Errors.Add(1) <= maxLoggedErrors {
		fmt.Fprintf(os.Stderr, "crawl-magpie: error %s: %v\n", u, err)
	}
}

// crawlMagpieAsync is crawlCollyAsync with magpie's import path, plus
// Workers(P), which fixes magpie's download pool at P (without it the pool
// follows the LimitRules; see crawlMagpieAsyncPorted).
func crawlMagpieAsync(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlAsyncWith(ctx, cfg, n, magpie.Async(true), magpie.Workers(cfg.P))
}

// crawlAsyncWith visits the seed with a collector of opts and waits.
func crawlAsyncWith(ctx context.Context, cfg harness.Config, n *harness.Counters, opts ...magpie.CollectorOption) error {
	c, err := newMagpie(ctx, cfg, n, opts...)
	if err != nil {
		return err
	}
	defer sampleHeld(ctx, n, c, nil)()
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
	return crawlAsyncWith(ctx, cfg, n, magpie.Async(true))
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
	defer sampleHeld(ctx, n, c, q.Storage())()
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	if err := q.Run(c); err != nil {
		return err
	}
	return ctx.Err()
}

// crawlMagpieQueueAdd is crawlMagpieQueue written as Colly programs write a
// queue crawl (issue 20): OnHTML hands every link to the queue with
// q.AddURL(e.Request.AbsoluteURL(href)) instead of e.Request.Visit. Nothing
// filters the links first (no HasVisited): what is already visited or
// queued is the library's to skip.
func crawlMagpieQueueAdd(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	return crawlQueueAddOn(ctx, cfg, n, &queue.InMemoryQueueStorage{}, nil)
}

// crawlQueueAddOn runs crawlMagpieQueueAdd's crawl on the queue storage qs,
// with visited as the collector's visited set unless nil, from the seed;
// opts are the collector's further options.
func crawlQueueAddOn(ctx context.Context, cfg harness.Config, n *harness.Counters, qs queue.Storage, visited storage.Storage, opts ...magpie.CollectorOption) error {
	q, err := queue.New(cfg.P, qs)
	if err != nil {
		return err
	}
	c, err := newMagpieLinks(ctx, cfg, n, func(e *magpie.HTMLElement) {
		u := e.Request.AbsoluteURL(e.Attr("href"))
		if u == "" {
			return
		}
		// A link the queue cannot take (a full or failing store) is
		// lost to the crawl: count it as an error.
		if err := q.AddURL(u); err != nil {
			countError(n, u, err)
		}
	}, opts...)
	if err != nil {
		return err
	}
	if visited != nil {
		if err := c.SetStorage(visited); err != nil {
			return err
		}
	}
	defer sampleHeld(ctx, n, c, q.Storage())()
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	if err := q.RunContext(ctx, c); err != nil {
		return err
	}
	return ctx.Err()
}
