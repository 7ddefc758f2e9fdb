// Package limits holds per-host politeness rules and the Gate that applies
// them without holding a download worker.
//
// A Limiter keeps the rules (Colly's LimitRule, here Rule) and the
// robots.txt Crawl-delay of each host. A Gate parks requests per host and
// hands out, on Get, the earliest one whose host may start a request now,
// together with a Ticket; the caller downloads it and reports the outcome
// with Ticket.Done, which frees the host's slot and feeds the adaptive parts
// (AutoThrottle, Retry-After, back-off on 429/503).
//
// # The life of a request
//
//	feeder:     gate.Put(ctx, u.Host, req)   // blocks while the Gate is full (see Gate)
//	dispatcher: req, t, err := gate.Get(ctx) // only when a worker is free
//	worker:     download(req); t.Done(limits.Result{...})
//
// A request waiting for its host's turn sits in the Gate, not in a worker,
// so workers serve ready hosts meanwhile.
//
// A request that does not travel through Put and Get, such as a host's
// robots.txt fetch, takes its place in the host's spacing with
// Limiter.Acquire, which waits for the host's turn on the open Gate that
// keeps the host (or on a Gate of its own, whose start the Limiter keeps
// for the next Gate) and returns the Ticket to report Sent and Done on:
//
//	t, err := lim.Acquire(ctx, u.Host) // waits for the host's turn
//	fetch(u); t.Sent(at); t.Done(limits.Result{...})
//
// # Semantics, and where they differ from Colly
//
//   - Host keys are host:port as in url.URL.Host; different ports are
//     different servers with separate state. A rule matches when its pattern
//     matches the hostname (port stripped, lower-cased) or the whole
//     host:port, so DomainGlob "127.0.0.1" matches "127.0.0.1:8080" (Colly
//     matches host:port only and misses it) and "127.0.0.1:8080" matches
//     that port only.
//   - Politeness (Rule.PolitenessBy, or the Limiter's default set with
//     SetPoliteness) may key hosts by registrable domain (PolitenessDomain)
//     or by the address their name resolves to (PolitenessIP) instead, as
//     BUbiNG is polite per host and per IP address: all hosts on one key
//     share one slot, its Parallelism, Delay and RandomDelay, Crawl-delay
//     (the longest of their robots.txt files'), AutoThrottle delay and
//     Retry-After or back-off hold. Hosts matched by different rules keep
//     a slot per rule. A name keyed by address is looked up when its
//     request is Put (or Acquired), through a bounded cache with a TTL
//     (SetResolver); Ticket.Addr says which address was keyed, and a name
//     that does not resolve is an error (ErrResolve), never a slot of
//     unknowns. The default keys by host and looks nothing up.
//   - Globs are compiled like Colly's, without separators: '*' crosses dots,
//     so "*.example.com" matches "a.b.example.com" (but not "example.com").
//   - The first matching rule in insertion order applies; no match means no
//     limit from rules.
//   - Parallelism is per host, not per rule (Colly shares one semaphore by
//     rule). Parallelism <= 0 means 1 when the host has a fixed delay
//     (Delay, RandomDelay or a Crawl-delay), so a delay-only rule
//     serializes like Colly's; no per-host limit for an AutoThrottle rule
//     (after its first response, see below); otherwise no per-host limit.
//     TotalParallelism caps all hosts of one rule together.
//   - Delay is the least gap between request starts to one host, plus a
//     uniform jitter in [0, RandomDelay). A start is the moment the request
//     reached the server, when the caller reports it with Ticket.Sent, else
//     the moment Get returned the item; with SetAwaitSent the host starts
//     nothing else until Sent or Done, so a slow dial or handshake cannot
//     bring two starts closer than Delay at the server. Colly sleeps Delay after each response while holding
//     its slot, so its starts are latency+Delay apart and Parallelism N
//     starts N at once; here starts are Delay apart whatever the
//     parallelism, nothing sleeps and no worker is held.
//   - robots.txt Crawl-delay (Limiter.SetCrawlDelay) is a floor for the
//     delay of a host with a rule unless Rule.IgnoreCrawlDelay, and for a
//     host without a rule it is the delay (with parallelism 1): robots
//     politeness by default. The IgnoreCrawlDelay option turns it off for
//     every host. Colly ignores Crawl-delay.
//   - AutoThrottle: after each response with a latency, target =
//     latency / TargetConcurrency; the delay jumps up to a higher target at
//     once and moves halfway down toward a lower one, but only on a 2xx; it
//     stays within [Delay, MaxDelay]. Until a host's first response it has
//     one request in flight, so a crawl does not open with a burst.
//   - Retry-After (Result.RetryAfter, any status) holds the host: no start
//     before done+RetryAfter, capped by MaxHold. Each 429 or 503 adds a
//     strike and holds the host for an "equal jitter" back-off in [b/2, b),
//     b = max(delay, 1s)·2^(strikes-1) capped by MaxBackoff (or the larger
//     AutoThrottle.MaxDelay); each later response below 500 other than 429
//     pays back one strike, other 5xx and transport errors are neutral.
//     Both apply to every host, with or without a rule: politeness by
//     default, and Colly has neither.
//   - Politeness outlives a Gate: when a Gate closes, each host's pending
//     delay or hold, strikes and adapted delay stay with the Limiter, and
//     the next Gate over it (the next crawl of the same collector) starts
//     the host from there, until the hold has passed and IdleTimeout has
//     elapsed.
//   - SetHostCap bounds hosts no rule limits, for a caller whose download
//     pool grows with what the rules allow.
//   - Per-host state is dropped after a host has been idle (nothing parked,
//     nothing in flight, no pending delay or hold) for IdleTimeout, so
//     memory stays bounded on crawls over many hosts; a dropped host forgets
//     its strikes and adapted delay.
//   - A host no rule matches, with no Crawl-delay and no hold, costs O(1)
//     and reads no clock and sets no timer on its way through the Gate.
//   - Rule.MaxRequestsPerHost, a budget of requests per host, is kept here
//     for the rule's hosts (Limiter.HostBudget) and applied by the caller
//     (magpie counts and refuses at admission); the Gate ignores it.
//
// # Several processes
//
// A Gate keeps its per-host state in memory, so two processes crawling one
// host each keep its Delay and Parallelism alone, and together break them.
// Limiter.SetShared (or the WithShared option) adds a Shared, state held
// outside the process (storage/redisstore.HostLimiter keeps it in Redis).
// When a host with a per-host limit is ready locally, Get asks Shared,
// without holding the Gate's lock, for a start: Shared takes a parallelism
// slot and moves the host's next start to now+delay for every process at
// once, or says how long to wait. A wait parks that host (other hosts go
// on); an error holds it for SharedBackoff, is counted in
// Stats.SharedErrors and handed to the error callback, never dropped;
// Ticket.Done frees the slot. The delay sent is the one the Gate draws
// (RandomDelay included), so both agree. Hosts with no per-host limit never
// reach Shared. Local limits still apply, so Shared only adds waiting, and
// the Get that asks is the only one serving that host until Shared answers.
//
// # Concurrency
//
// Limiter, Rule and Gate are safe for concurrent use. Every blocking call
// takes a context and also wakes on Gate.Close. The package starts no
// goroutines. Do not modify a Rule after it has been added to a Limiter:
// the Limiter works from a snapshot taken by Add.
package limits
