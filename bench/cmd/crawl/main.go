// Command crawl crawls a whole site with the raw baseline or Colly and prints
// one JSON line of results: pages fetched, errors, wall and CPU time and peak
// RSS of this process. The magpie crawlers live in the bench/magpie module
// (Colly and magpie cannot share a build); see bench/run.sh.
//
// Implementations (-impl):
//
//	raw           P goroutines over net/http, x/net/html tokenizer, in-memory visited set
//	colly-async   Colly v2, Async + LimitRule, e.Request.Visit from OnHTML
//	colly-queue   Colly v2, sync collector run by queue.New(P, ...), q.AddURL from OnHTML of the links
//	              HasVisited says are new
//	colly-queue-add  the same with every link: q.AddURL(e.Request.AbsoluteURL(href)), no HasVisited
//
// Politeness: with -delay or -host-par every host gets its own limit
// (at most -host-par requests in flight, -delay between request starts),
// and -p still bounds the workers (raw, queues) where the implementation has
// them. Only the site's hostnames are crawled; links elsewhere are ignored.
package main

import "github.com/magpiecrawl/magpie/bench/internal/harness"

var impls = map[string]harness.CrawlFunc{
	"raw":         harness.Raw,
	"colly-async": crawlCollyAsync,
	"colly-queue": crawlCollyQueue,
	// Issue 20's idiom: no HasVisited filter before AddURL.
	"colly-queue-add": crawlCollyQueueAdd,
}

func main() { harness.Main(impls) }
