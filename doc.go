// Package magpie is a library for writing web crawlers with Colly's API on a
// buffer-pool scheduler: callbacks on a Collector, per-host politeness,
// robots.txt, and pluggable storage from memory to disk to Redis.
//
// A crawler is a Collector with callbacks, started by Visit:
//
//	c := magpie.NewCollector(
//		magpie.AllowedDomains("example.com"), // stay on the site
//		magpie.MaxDepth(2),
//	)
//	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
//		e.Request.Visit(e.Attr("href")) // follow every link
//	})
//	c.OnHTML("title", func(e *magpie.HTMLElement) {
//		fmt.Println(e.Request.URL, e.Text)
//	})
//	c.OnError(func(r *magpie.Response, err error) {
//		log.Println(r.Request.URL, err)
//	})
//	if err := c.Visit("https://example.com/"); err != nil {
//		log.Fatal(err)
//	}
//	fmt.Println(c) // Requests made: 12 (12 responses) | Callbacks: …
//
// Example runs the same against a local site; _examples/quickstart is a
// program to paste. From there: Async and Wait for a concurrent crawl,
// Limit for per-host politeness, Emit and feed for items, queue.New for a
// queue run, SetStorage with storage/sqlitestore or storage/redisstore for
// a crawl that survives a restart, and Stats for what happened.
//
// # The life of a request
//
// Visit, Request.Visit, Post, Request and queue entries all enter through
// admission: the URL is parsed (relative URLs against the parent), then
// scheme, MaxDepth, DisallowedURLFilters, URLFilters, DisallowedDomains and
// AllowedDomains, robots.txt (on by default, matched with the User-Agent
// sent; its fetch is a request to the host that waits for the host's turn
// under the LimitRules, like any other), MaxRequests and MaxRequestsPerHost (exact) and the visited check (one atomic step) are
// applied. A refusal is returned to the caller, delivered to OnRefused and
// counted in Stats().Refused by reason; OnError is only for requests that
// were attempted and failed (a network error, an HTTP error status, a
// callback's panic), as in Colly. A host that cannot be reached (connection
// refused, DNS or TLS failure) fails its requests to OnError with that
// error, whether or not robots.txt is obeyed. An admitted request waits in the frontier (memory, or a storage.Queue with
// RunQueue), then in the limiter's gate until its host may start, then is
// downloaded and analysed by the scheduler's workers. Redirect hops get the
// same admission checks, each hop one level deeper.
//
// # Callback order
//
// OnRequest (Abort: dropped silently), OnRequestHeaders (Abort:
// ErrAbortedBeforeRequest), OnResponseHeaders (Abort: ErrAbortedAfterHeaders),
// then either OnError, or OnResponse, OnHTML, OnXML and OnScraped. A panic in
// a callback is recovered and delivered to OnError (ErrCallbackPanic).
//
// # Concurrency
//
// Callbacks run on the engine's workers. An async collector's run several at
// once (as do a queue run's with more than one thread): guard shared state. A
// sync collector's callbacks take turns, as in Colly, while downloads
// overlap; ConcurrentCallbacks lets them run at once too.
// A Visit from inside a callback never waits. In sync mode (the default) a
// top-level Visit returns when the crawl it started is done; with Async, Visit
// returns once admitted and Wait returns when the crawl is done. Stop cancels
// a crawl. No goroutine of a crawl outlives Wait, Stop or RunQueue, except
// one blocked in a callback that never returns: StopGrace after the crawl
// was told to stop it is abandoned, and its request reported with
// ErrCallbackStuck. Do not call Wait from a callback.
//
// # Where each step lives
//
// The package is flat, as Colly's is; its files follow the journey:
//
//	admission    admit.go           every way in: build (newRequest), check (admit), enqueue
//	             internal/urlkey    links read as browsers do, canonical URLs, visited keys
//	             config.go          the settings a crawl runs with (config, settings)
//	             refusals.go        the one door of every refusal: OnRefused, Stats().Refused
//	             priority.go        Priority decided at admission: BreadthFirst, DepthFirst, Prioritize
//	             robots.go, sitemap.go   robots.txt checks; sitemap documents and their URLs
//	             robots_links.go    a page's links to one host checked against one robots.txt lookup
//	frontier     frontier.go        the frontier interface; the in-memory frontier, a queue per host by priority, paced by the gate
//	             frontier_pending.go  a link waiting in memory: a compact entry, a Request again when it leaves
//	             frontier_queue.go  RunQueue's frontier over a storage.Queue: push, lease, admit on lease
//	             frontier_hosts.go  a queue run over a storage.HostQueue: leases by host, hosts' ready times stored
//	             frontier_acks.go   a queue entry's end: its links stored, acks batched, leases renewed
//	             frontier_adds.go   queue.AddURL and AddRequest during a run, stored with the links
//	             frontier_faults.go, outage.go   storage failures of a queue run
//	             frontier_head.go   FrontierHead: the next requests, from the gate, the frontier or a HostQueue
//	gate         limits/            per-host turns (LimitRule), the gate requests wait in
//	             politeness.go      PolitenessBy and Resolver; a connection pinned to the address the gate keyed
//	download     fetch.go           the download stage as named steps, and run.download
//	             http_backend.go    the HTTP client: cookies, proxy, redirect policy, one round trip
//	             http_backend_unix.go, http_backend_other.go   the open-file limit that sizes the idle pool
//	             fetcher.go, cache.go, decode.go   the Fetcher hook, CacheDir, body decoding
//	             read_scratch.go    read buffers: the scratch of bodies of unknown length, ReuseBody's
//	             body_recycle.go    body buffers reused once a collection finds nothing reaches them
//	             archive.go         the Archiver hook: each exchange as it crossed the wire (warc/ writes WARC)
//	             archive_tunnel.go  HTTPS through a proxy while archiving: magpie's own tunnel, recorded above TLS
//	analysis     analyze.go         the response callbacks, then the request is finished
//	             analyze_stream.go  StreamHTML: matching while tokenizing (stream_select.go:
//	                                which selectors can)
//	             stream_tree.go     the whole tree built by that streamer where it is html.Parse's
//	             retry.go           RetryPolicy, BusyRetries, MaxRetryAfter, waits for robots.txt;
//	                                the waiting requests that Stats().Waits lists
//	             recrawl.go         Recrawl: due pages, conditional requests, what changed, the schedule
//	items        items.go           Emit and the item pipeline
//	the run      engine.go          startRun, the feeder and dispatcher, Wait, Stop, RunQueue
//	             flight.go          a request's bookkeeping in flight: run, tries, marks, host's turn, callbacks
//	             callbacks.go       running user code: registration, panics, the callback mark
//	             runners.go         the callback runners: guard, reap, stuck callbacks
//	             steer.go           steering a running crawl: Pause, Resume, BlockHost, AddSeed
//	             watch.go           for watchers: RecentFailures (with referrers), HostReports, Stats().Failed
//	             internal/scheduler the stage engine: pools and workers of download, analysis, items
//
// # The goroutines of a crawl
//
// A crawl is one run (engine.go), started by the first admitted request (or
// RunQueue) and owning these goroutines; run.spawn starts those of the run
// itself, and run.shutdown waits for all of them:
//
//   - the feeder (run.feed, spawned by startRun) moves requests from the
//     frontier to the gate (looking a name up first for a host keyed by
//     address; one that does not resolve goes to a download worker at once,
//     to fail there); it alone leases from a queue frontier and owns
//     the frontier state marked feeder-only. A callback that ends it with
//     runtime.Goexit while a lease is refused makes it spawn its successor.
//   - the dispatcher (run.dispatch, spawned by startRun) takes a download
//     token, then a request whose host may start from the gate, counts it
//     busy and submits it to the scheduler; while the collector is paused
//     it holds that request (run.submit) until Resume or the run stops.
//   - the error drain (run.drainErrors, spawned by startRun) logs what the
//     scheduler reports.
//   - the StdlibContext watcher (run.reapAfter, spawned by startRun when that
//     context can end) abandons the callbacks still running a grace later.
//   - the progress logger (run.progress, spawned by startRun with
//     ProgressInterval) logs a Stats line every period.
//   - the scheduler's workers (internal/scheduler, started by its Start and
//     stopped by its Stop in run.shutdown): download workers run
//     run.download (the fetch and its request callbacks), analyze workers
//     run.analyze (the response callbacks), one pipeline worker runs the
//     item processors. A pool sized by the limits grows and shrinks with
//     the downloads the gate lets start.
//   - the callback runners (run.guard, runners.go), started by the run as
//     stage calls that run user code need them and ended by run.shutdown:
//     a worker hands its call to an idle runner and waits for it, or gives
//     it up as stuck after StopGrace once the run stops (the runner is then
//     written off and exits when the callback returns).
//   - the lease renewer (queueFrontier.renewLoop, started by the queue
//     frontier's first lease, stopped by its close): renews the leases a
//     queue run holds.
//   - at stop, run.shutdown's grace timer (reaps stuck callbacks) and, for a
//     Stop called from a callback, the goroutine that shuts the run down for
//     it (Wait waits for it).
package magpie
