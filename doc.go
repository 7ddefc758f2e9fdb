// Package magpie is a library for writing web crawlers with Colly's API on a
// buffer-pool scheduler: callbacks on a Collector, per-host politeness,
// robots.txt, and pluggable storage from memory to disk to Redis.
//
// # The life of a request
//
// Visit, Request.Visit, Post, Request and queue entries all enter through
// admission: the URL is parsed (relative URLs against the parent), then
// scheme, MaxDepth, DisallowedURLFilters, URLFilters, DisallowedDomains and
// AllowedDomains, robots.txt (on by default, matched with the User-Agent
// sent; its fetch is a request to the host that waits for the host's turn
// under the LimitRules, like any other), MaxRequests (exact) and the visited check (one atomic step) are
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
// Callbacks run on the engine's workers, several at once; guard shared state.
// A Visit from inside a callback never waits. In sync mode (the default) a
// top-level Visit returns when the crawl it started is done; with Async, Visit
// returns once admitted and Wait returns when the crawl is done. Stop cancels
// a crawl. No goroutine of a crawl outlives Wait, Stop or RunQueue, except
// one blocked in a callback that never returns: StopGrace after the crawl
// was told to stop it is abandoned, and its request reported with
// ErrCallbackStuck. Do not call Wait from a callback.
package magpie
