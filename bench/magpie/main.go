// Command crawl-magpie is bench/cmd/crawl for magpie: the same flags and the
// same JSON line, with implementations raw, magpie-async and magpie-queue.
// It is its own module because magpie and Colly need incompatible versions
// of github.com/gobwas/glob and so cannot be linked into one binary.
//
//	magpie-async  NewCollector(Async(true), AllowedDomains(...), Workers(P)), LimitRule "*",
//	              e.Request.Visit from OnHTML, Visit + Wait
//	magpie-async-ported  the same without Workers(P): a Colly program with its import path changed
//	magpie-queue  the same collector without Async, run by queue.New(P, unbounded memory queue) + AddURL + Run
//	magpie-queue-sqlite, magpie-queue-redis  magpie-queue with sqlitestore (a new file) or redisstore (at -redis)
//	              as the queue's storage and the visited set
//	magpie-queue-add, magpie-queue-add-sqlite, magpie-queue-add-redis  the same three queue crawls written
//	              as Colly programs write them: q.AddURL(e.Request.AbsoluteURL(href)) from OnHTML, no Visit
//
// and the storage scenario's crawls (storage.go): magpie-frontier-sqlite,
// magpie-frontier-mem and magpie-redis, and magpie-redis-ops (cluster.go:
// queue operations per second, on one Redis or a Redis Cluster).
//
// Every magpie crawler above also takes -max-requests, -stop-after,
// -prioritize, -politeness and -sample (order.go, sample.go: issue 39's
// priority, politeness and broad scenarios), and -features alone prints
// which newer options the build has.
//
// -cpuprofile and -memprofile write pprof profiles of the crawl itself (flag
// parsing and the result line excluded).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/magpiecrawl/magpie/bench/internal/harness"
)

var (
	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the crawl to this file")
	memProfile = flag.String("memprofile", "", "write an allocation profile of the crawl to this file")
)

var impls = map[string]harness.CrawlFunc{
	"raw":          profiled(harness.Raw),
	"magpie-async": profiled(crawlMagpieAsync),
	// A Colly program ported as is: no Workers option.
	"magpie-async-ported": profiled(crawlMagpieAsyncPorted),
	"magpie-queue":        profiled(crawlMagpieQueue),
	// The same queue crawl on the durable stores (storage.go).
	"magpie-queue-sqlite": profiled(crawlQueueSQLite),
	"magpie-queue-redis":  profiled(crawlQueueRedis),
	// The queue crawl as Colly programs write it: q.AddURL from OnHTML
	// (issue 20), on the three storages.
	"magpie-queue-add":        profiled(crawlMagpieQueueAdd),
	"magpie-queue-add-sqlite": profiled(crawlQueueAddSQLite),
	"magpie-queue-add-redis":  profiled(crawlQueueAddRedis),

	// The storage scenario (storage.go).
	"magpie-frontier-sqlite": profiled(crawlFrontierSQLite),
	"magpie-frontier-mem":    profiled(crawlFrontierMemory),
	"magpie-redis":           crawlRedis,
	// Queue operations per second on Redis, no crawl (cluster.go).
	"magpie-redis-ops": redisOps,
}

// profiled wraps a crawl with the profiles asked for; harness.Main has
// parsed the flags by the time a crawl runs.
//
// It also gives the crawl the context -stop-after ends (order.go), and
// returns nil, not the context's error, for a crawl that ended so.
func profiled(fn harness.CrawlFunc) harness.CrawlFunc {
	return func(ctx context.Context, cfg harness.Config, n *harness.Counters) (err error) {
		ctx, cancel, stopped := withStopAfter(ctx)
		defer cancel()
		defer func() { err = stopped(err) }()
		if *memProfile != "" {
			runtime.MemProfileRate = 64 << 10
		}
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return fmt.Errorf("cpuprofile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("cpuprofile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		err = fn(ctx, cfg, n)
		if *memProfile != "" {
			f, ferr := os.Create(*memProfile)
			if ferr != nil {
				return fmt.Errorf("memprofile: %w", ferr)
			}
			defer f.Close()
			if werr := pprof.Lookup("allocs").WriteTo(f, 0); werr != nil {
				return fmt.Errorf("memprofile: %w", werr)
			}
		}
		return err
	}
}

func main() {
	// -features alone prints what this build's magpie has beyond the
	// Colly-style API (order.go), so that run.sh knows which flags an old
	// tree's crawler takes, and exits.
	if len(os.Args) == 2 && os.Args[1] == "-features" {
		var have []string
		for f := range features {
			have = append(have, f)
		}
		sort.Strings(have)
		fmt.Println(strings.Join(have, " "))
		return
	}
	harness.Main(impls)
}
