package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"

	"github.com/magpiecrawl/magpie"
)

// Flags of the priority and politeness scenarios (issue 39), for every
// magpie crawler but the storage scenario's multi-process ones.
var (
	maxRequests = flag.Int("max-requests", 0, "MaxRequests(N): admit at most N requests (0: no limit)")
	stopAfter   = flag.Int64("stop-after", 0, "stop the crawl (end its context, as Ctrl-C or --max-duration would) once it has N pages (0: never)")
	prioritize  = flag.Bool("prioritize", false, "Prioritize: rank each request by its URL's rank query parameter (the site's -rank mode), higher first; an error in a build whose magpie has no Prioritize")
	politeness  = flag.String("politeness", "", "PolitenessBy: host, domain or ip (empty: the default, per host); an error in a build whose magpie has no PolitenessBy")
	sampleEvery = flag.Duration("sample", 0, "read the entries the queue has leased and the requests parked in the gate every D, and report the most of each (0: not read)")
)

// features names what this build's magpie has beyond the Colly-style API
// every crawler uses; the files that need a newer magpie add to it (see
// -features in main.go).
var features = map[string]bool{}

// The option hooks of the files behind build tags: nil when this build's
// magpie lacks the option.
var (
	// prioritizeOption returns Prioritize(f).
	prioritizeOption func(f func(*magpie.Request) int) magpie.CollectorOption
	// politenessOption returns PolitenessBy for a -politeness value.
	politenessOption func(s string) (magpie.CollectorOption, error)
)

// errNotInBuild is returned for a flag whose option this build's magpie
// does not have.
var errNotInBuild = errors.New("not in this build's magpie")

// orderOptions returns the collector options the flags above ask for.
func orderOptions() ([]magpie.CollectorOption, error) {
	var opts []magpie.CollectorOption
	if *maxRequests < 0 || *maxRequests > math.MaxUint32 {
		return nil, fmt.Errorf("-max-requests %d out of range", *maxRequests)
	}
	if *maxRequests > 0 {
		opts = append(opts, magpie.MaxRequests(uint32(*maxRequests)))
	}
	if *prioritize {
		if prioritizeOption == nil {
			return nil, fmt.Errorf("-prioritize: Prioritize %w", errNotInBuild)
		}
		opts = append(opts, prioritizeOption(urlRank))
	}
	if *politeness != "" {
		if politenessOption == nil {
			return nil, fmt.Errorf("-politeness: PolitenessBy %w", errNotInBuild)
		}
		o, err := politenessOption(*politeness)
		if err != nil {
			return nil, fmt.Errorf("-politeness: %w", err)
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// urlRank is a request's priority on the site's -rank mode: its URL's rank
// query parameter, 0 when it has none (the seed), as a program ranks the
// links of a site it does not control by URL pattern.
func urlRank(r *magpie.Request) int {
	if r == nil || r.URL == nil {
		return 0
	}
	k, err := strconv.Atoi(r.URL.Query().Get("rank"))
	if err != nil {
		return 0
	}
	return k
}

// stopKey is the context key of the cancel function -stop-after calls.
type stopKey struct{}

// errStopAfter is the cause of a crawl's context ended by -stop-after.
var errStopAfter = errors.New("-stop-after reached")

// withStopAfter returns a context that -stop-after ends once the crawl has
// its pages (see countPage), and the function that says whether an error a
// crawl returned is only that ending.
func withStopAfter(ctx context.Context) (context.Context, context.CancelFunc, func(error) error) {
	if *stopAfter <= 0 {
		return ctx, func() {}, func(err error) error { return err }
	}
	ctx, cancel := context.WithCancelCause(ctx)
	ctx = context.WithValue(ctx, stopKey{}, cancel)
	return ctx, func() { cancel(nil) }, func(err error) error {
		if errors.Is(context.Cause(ctx), errStopAfter) && errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}

// stopAt ends ctx when pages, the crawl's count of pages so far, reaches
// -stop-after.
func stopAt(ctx context.Context, pages int64) {
	if *stopAfter > 0 && pages == *stopAfter {
		if cancel, ok := ctx.Value(stopKey{}).(context.CancelCauseFunc); ok {
			cancel(errStopAfter)
		}
	}
}
