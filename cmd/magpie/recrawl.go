package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// Recrawling from the command line: a crawl with --state records each
// page's validators, digest and schedule in the state file; run again over
// a finished crawl (nothing left in its queue), or with any of the flags
// below, it revisits what is due, conditionally, and every item says what
// changed.

// defaultRevisitAfter is --revisit-after's default: a crawl run again the
// same day finds nothing due (and says so), the next day revisits every
// page, conditionally, as a daily mirror or index wants.
const defaultRevisitAfter = 24 * time.Hour

// recrawlFlags are magpie crawl's recrawl flags.
type recrawlFlags struct {
	after, max time.Duration
	refetch    bool
	// set is true when one of them was given on the command line.
	set func() bool
}

// register adds the flags to fs.
func (r *recrawlFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&r.after, "revisit-after", defaultRevisitAfter, "with --state: the shortest time before a page is fetched again (0: every known page is due now, still fetched conditionally)")
	fs.DurationVar(&r.max, "revisit-max", 0, "with --state: the longest revisit interval the adaptive schedule reaches (0: 90 days)")
	fs.BoolVar(&r.refetch, "refetch", false, "with --state: download revisited pages in full (no If-None-Match / If-Modified-Since); changes are judged by digest")
	r.set = func() bool { return fs.Changed("revisit-after") || fs.Changed("revisit-max") || fs.Changed("refetch") }
}

// check refuses recrawl flags without --state.
func (r *recrawlFlags) check(state string) error {
	if state == "" && r.set != nil && r.set() {
		return usagef("--revisit-after, --revisit-max and --refetch need --state")
	}
	if r.after < 0 || r.max < 0 {
		return usagef("--revisit-after and --revisit-max must be >= 0")
	}
	return nil
}

// policy is the RecrawlPolicy the flags give, nil without --state.
func (r *recrawlFlags) policy(state string) *magpie.RecrawlPolicy {
	if state == "" {
		return nil
	}
	return &magpie.RecrawlPolicy{MinInterval: r.after, MaxInterval: r.max, Refetch: r.refetch}
}

// explicit reports whether a recrawl flag was given.
func (r *recrawlFlags) explicit() bool { return r.set != nil && r.set() }

// registerRecrawl makes a gone page (404 or 410 where a page answered 2xx
// before) an item too, with its change, so that a recrawl's output lists
// every revisit. A URL that never answered 2xx has no change: it is a
// failure, as on the first crawl.
func registerRecrawl(c *magpie.Collector, cfg crawlConfig) {
	c.OnError(func(r *magpie.Response, _ error) {
		if r.Change != magpie.ChangeGone {
			return
		}
		r.Emit(bodilessItem(cfg, r))
	})
}

// recrawlStarts queues a recrawl's start: every page of the state file that
// is due, and the start URLs, each made due (always revisited). It reports
// whether it did. A crawl that is not finished (entries left in its queue:
// a first crawl or a recrawl that was stopped or killed) resumes instead
// (false), whatever the flags: the same command run again after a kill
// finishes the recrawl it began, and each page it had finished keeps the
// change it was reported with, rather than being revisited and found
// unchanged. A finished crawl with nothing due, run without a recrawl
// flag, returns errFinished: it has nothing to do, and the output is not
// touched.
func recrawlStarts(ctx context.Context, c *magpie.Collector, store *sqlitestore.Store, q *queue.Queue, st *starts, explicit bool) (bool, error) {
	n, err := store.Len(ctx)
	if err != nil {
		return false, fmt.Errorf("--state: %w", err)
	}
	if n.Total() > 0 {
		return false, nil
	}
	due := map[string]bool{}
	for u, err := range c.DueURLs(ctx) {
		if err != nil {
			return false, fmt.Errorf("--state: %w", err)
		}
		if err := q.AddURL(u); err != nil {
			return false, fmt.Errorf("--state: %w", err)
		}
		due[u] = true
	}
	if len(due) == 0 && !explicit {
		crawled := true
		for _, u := range st.order {
			visited, err := c.HasVisited(u)
			if err != nil {
				return false, fmt.Errorf("--state: %w", err)
			}
			crawled = crawled && visited
		}
		if crawled {
			return false, errFinished
		}
	}
	for _, u := range st.order {
		// MarkDue of a due page (queued above) only makes it a start URL,
		// at depth 1 rather than where an earlier crawl found it.
		if err := c.MarkDue(u); err != nil {
			return false, fmt.Errorf("--state: %w", err)
		}
		if due[u] {
			continue // queued above: a second entry would be refused as visited
		}
		if err := q.AddURL(u); err != nil {
			return false, fmt.Errorf("--state: %w", err)
		}
	}
	return true, nil
}

// recrawlSummary writes the recrawl's counts under the summary, when the
// run revisited a page: a first crawl (only new pages) has none.
func recrawlSummary(w io.Writer, st magpie.Stats) {
	r := st.Recrawl
	if r.Changed+r.Unchanged+r.Gone == 0 {
		return
	}
	fmt.Fprintf(w, "recrawl: %d new, %d changed, %d unchanged, %d gone; %d links to pages not due\n",
		r.New, r.Changed, r.Unchanged, r.Gone, st.Refused[magpie.RefusedNotDue])
}
