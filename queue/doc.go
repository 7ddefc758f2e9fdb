// Package queue runs a crawl from a queue of requests with a fixed number of
// consumer threads, as Colly's queue package does, on magpie's engine.
//
//	q, err := queue.New(8, nil) // nil: in-memory, MaxSize 100000
//	if err != nil { ... }
//	for _, u := range seeds {
//		q.AddURL(u)
//	}
//	err = q.Run(c)
//
// # The life of a queued request
//
// AddURL and AddRequest marshal a request (Request.Marshal) and push it into
// the queue's Storage; called during this Queue's Run (from its callbacks, as
// Colly programs do), they add it to the batch of links being stored instead
// (below), checked against the visited set. Run hands the Storage to Collector.RunQueue, which
// leases entries, decodes them, admits them like any Visit (domains, depth,
// robots, visited set, MaxRequests) and fetches them with Threads download
// workers. Requests that callbacks discover (e.Request.Visit) are pushed into
// the same Storage, so a shared Storage sees every link: a page's links in
// one batch when the page is done. An entry is acknowledged when its request
// is done — fetched, refused or failed — and released back to the Storage
// when the run stops first. The run leases ahead of its threads, by host, so
// that hosts waiting out a Delay do not leave the others idle, and renews the
// leases it holds (see magpie.QueueLookahead). Run returns when the
// Storage is empty and nothing is in flight, after Stop, or when its context
// is done. An entry that does not decode is reported (OnError and Run's
// error) and counted, never skipped silently.
//
// # Differences from Colly
//
//   - AddURL starts at depth 1, like c.Visit (Colly: 0), so MaxDepth means the
//     same with and without a queue.
//   - AddRequest never blocks, before, during or after Run (Colly blocks
//     forever after Run returned).
//   - A second concurrent Run returns ErrRunning (Colly panics); Run may be
//     called again after it returns.
//   - Stop does not leak goroutines, and unfinished requests stay in the
//     Storage for a later Run.
//   - With an Async collector, Run still waits for the whole crawl.
//   - Requests refused before fetching (domain, depth, robots.txt, visited)
//     reach OnRefused and Stats().Refused, and their entries are
//     acknowledged; OnError is for requests that were sent and failed, and
//     for entries that do not decode. Once MaxRequests is spent no more
//     entries are leased: the rest stay in the Storage for a later Run.
//   - AddURL returns an error for a URL without a scheme or host instead of
//     storing a request that can never be sent.
//   - AddURL and AddRequest during Run store no duplicate: a request visited
//     already, or added during the run and not crawled yet, is refused
//     (OnRefused, Stats().Refused["visited"]); a full Storage refuses it with
//     ErrQueueFull the same way rather than as the call's error.
//
// # Storage
//
// Storage is storage.Queue: at-least-once delivery with leases. The mapping
// from Colly's four-method queue storage is:
//
//	Colly                      storage.Queue
//	Init() error               (New calls Init if the storage has one)
//	AddRequest(b)              Push(ctx, b...)       batched, all or none
//	GetRequest() (b, err)      Lease(ctx, n, ttl)    the entry stays until Ack;
//	                                                 Release(id, notBefore) puts it
//	                                                 back (now or later); an expired
//	                                                 lease comes back by itself
//	(nil, nil when empty)      ErrEmpty (storage.ErrQueueEmpty)
//	QueueSize() (int, err)     Len(ctx)              ready, delayed and leased counts
//
// InMemoryQueueStorage keeps Colly's name and MaxSize field; the
// storage/sqlitestore and storage/redisstore packages persist the queue. New
// also takes a Colly storage as it is (gocolly/redisstorage,
// colly-sqlite3-storage) and wraps it with FromColly, which only gives
// at-most-once delivery, because Colly's GetRequest removes a request for
// good.
//
// # Concurrency
//
// A Queue is safe for concurrent use. Run owns every goroutine it starts and
// returns only after they have exited. The Queue never closes its Storage.
package queue
