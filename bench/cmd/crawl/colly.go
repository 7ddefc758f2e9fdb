package main

import (
	"context"
	"github.com/magpiecrawl/magpie/bench/internal/harness"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/queue"
)

// collyRules returns the LimitRules a Colly user would set. Colly keeps one
// semaphore per rule, not per host, so per-host politeness needs one rule per
// host; without politeness a single "*" rule caps the whole crawl at P.
func collyRules(cfg harness.Config) []*colly.LimitRule {
	if !cfg.Polite {
		return []*colly.LimitRule{{DomainGlob: "*", Parallelism: cfg.P}}
	}
	rules := make([]*colly.LimitRule, 0, len(cfg.Hosts))
	for _, h := range cfg.Hosts {
		rules = append(rules, &colly.LimitRule{DomainGlob: h, Parallelism: cfg.HostPar, Delay: cfg.Delay})
	}
	return rules
}

func newColly(ctx context.Context, cfg harness.Config, n *harness.Counters, opts ...colly.CollectorOption) (*colly.Collector, error) {
	opts = append(opts, colly.AllowedDomains(cfg.Allowed...), colly.StdlibContext(ctx))
	c := colly.NewCollector(opts...)
	c.IgnoreRobotsTxt = !cfg.Robots
	if err := c.Limits(collyRules(cfg)); err != nil {
		return nil, err
	}
	c.OnResponse(func(*colly.Response) { n.Pages.Add(1) })
	c.OnError(func(*colly.Response, error) { n.Errors.Add(1) })
	return c, nil
}

// crawlCollyAsync: Async collector, every link visited from OnHTML.
func crawlCollyAsync(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newColly(ctx, cfg, n, colly.Async(true))
	if err != nil {
		return err
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	if err := c.Visit(cfg.Seed); err != nil {
		return err
	}
	c.Wait()
	return ctx.Err()
}

// crawlCollyQueue: a synchronous collector driven by a queue of P threads.
// Links go to the queue, as Colly's documentation suggests; e.Request.Visit
// would recurse on the runner's stack instead. Colly's default queue storage
// drops requests past 100,000 entries, which a 200,000-page crawl reaches, so
// the storage is unbounded; HasVisited keeps already fetched pages out.
func crawlCollyQueue(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newColly(ctx, cfg, n)
	if err != nil {
		return err
	}
	q, err := queue.New(cfg.P, &queue.InMemoryQueueStorage{MaxSize: 0})
	if err != nil {
		return err
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		u := e.Request.AbsoluteURL(e.Attr("href"))
		if u == "" {
			return
		}
		if seen, err := c.HasVisited(u); err == nil && seen {
			return
		}
		_ = q.AddURL(u)
	})
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	if err := q.Run(c); err != nil {
		return err
	}
	return ctx.Err()
}

// crawlCollyQueueAdd is crawlCollyQueue as Colly programs usually write it
// (the idiom of issue 20, and bench/magpie's magpie-queue-add):
// q.AddURL(e.Request.AbsoluteURL(href)) from OnHTML with no HasVisited
// filter, so the queue also holds links already fetched or queued, which
// the collector refuses when their turn comes.
func crawlCollyQueueAdd(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newColly(ctx, cfg, n)
	if err != nil {
		return err
	}
	q, err := queue.New(cfg.P, &queue.InMemoryQueueStorage{MaxSize: 0})
	if err != nil {
		return err
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		if u := e.Request.AbsoluteURL(e.Attr("href")); u != "" {
			_ = q.AddURL(u)
		}
	})
	if err := q.AddURL(cfg.Seed); err != nil {
		return err
	}
	if err := q.Run(c); err != nil {
		return err
	}
	return ctx.Err()
}
