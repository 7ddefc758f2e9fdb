// Command crawl-magpie is bench/cmd/crawl for magpie: the same flags and the
// same JSON line, with implementations raw, magpie-async and magpie-queue.
// It is its own module because magpie and Colly need incompatible versions
// of github.com/gobwas/glob and so cannot be linked into one binary.
//
//	magpie-async  NewCollector(Async(true), AllowedDomains(...), Workers(P)), LimitRule "*",
//	              e.Request.Visit from OnHTML, Visit + Wait
//	magpie-queue  the same collector without Async, run by queue.New(P, nil) + AddURL + Run
//
// and the storage scenario's crawls (storage.go): magpie-frontier-sqlite,
// magpie-frontier-mem and magpie-redis.
package main

import "github.com/magpiecrawl/magpie/bench/internal/harness"

var impls = map[string]harness.CrawlFunc{
	"raw":          harness.Raw,
	"magpie-async": crawlMagpieAsync,
	"magpie-queue": crawlMagpieQueue,

	// The storage scenario (storage.go).
	"magpie-frontier-sqlite": crawlFrontierSQLite,
	"magpie-frontier-mem":    crawlFrontierMemory,
	"magpie-redis":           crawlRedis,
}

func main() { harness.Main(impls) }
