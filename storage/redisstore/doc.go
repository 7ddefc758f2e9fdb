// Package redisstore keeps a crawl's state in Redis so that several
// processes, on one host or many, share one crawl: an exact visited set, the
// cookies, and a frontier queue with at-least-once delivery. A Store
// implements storage.Storage, storage.VisitedSet, storage.CookieStore,
// storage.Queue and storage.HostQueue (a queue that leases by host, with
// hosts' ready times, per-host limits and priorities).
//
// Keys, for prefix P:
//
//	P:v:<shard>       SET of visited IDs (uint64 bits as a decimal int64), sharded
//	                  so each set stays an intset: ~9 bytes per ID measured
//	P:queue           STREAM of entries (field d = data), consumer group "magpie"
//	P:leases          HASH stream ID -> "<token>:<deliveries>"; an empty token
//	                  marks an entry released and not yet leased again
//	P:expiry          ZSET stream ID of held leases, scored by expiry (server ms)
//	P:delayed         ZSET stream ID of released entries, scored by not-before
//	P:c:<host>        STRING of a host's cookies (newline-joined Set-Cookie lines)
//	P:slots:{<host>}  ZSET of HostLimiter's parallelism slots, scored by expiry (ms)
//	P:next:{<host>}   STRING, HostLimiter: the host's next allowed start (server µs)
//	P:partitions      STRING, the frontier's partition count, set by the first Store
//	P:visited-shards  STRING, the visited set's shard count, set by the first Store
//	P:lastid          STRING, the last entry ID a push issued, once PushHosted was used
//	P:hq:...          the host queue's keys (PushHosted's entries; see below)
//
// The host queue keeps the entries given to PushHosted (but those of host
// "" and priority 0, which go to the stream as Push's do) beside the
// stream: P:hq:e (HASH entry ID -> priority, host, data), one ZSET per host
// of its pending entries ordered by priority then push order
// (P:hq:h:<host>), a ZSET of the hosts with pending entries ordered by
// their next entry (P:hq:a) and the same of those believed ready (P:hq:r),
// the hosts waiting for their ready time (P:hq:w, by it) or found at their
// per-host limit (P:hq:b, by leased count), the hosts' ready times and
// leased counts (P:hq:t, P:hq:n, HASHes by host), the entries in push order
// for Lease (P:hq:f), their leases, deadlines and not-before times (P:hq:l,
// P:hq:x, P:hq:d), and the hosted leases of each consumer
// (P:hq:o:<consumer>). Entry IDs are "<ms>-<seq>" at fixed width, and
// comparable with the stream's: Lease hands out both kinds in push order,
// and LeaseHosts takes the stream's entries as host "" at priority 0. One
// script does a LeaseHosts: it takes hosts from P:hq:r best first, merged
// with the entries of the hosts it has opened, and moves a host it finds
// not ready or at its limit to P:hq:w or P:hq:b, so that a waiting host
// costs nothing until its time comes or one of its leases ends: the work
// is O(log) per entry and per host handed out, whatever the number of
// hosts waiting. A host with nothing pending or leased keeps only its
// ready time, until that time passes. Hosts' ready times are the callers'
// clocks (LeaseHosts' now, SetHostReady's times); lease deadlines and
// not-before times are the server's, as for Lease.
//
// A partitioned frontier (Options.Partitions above 1, or any Store on a
// Redis Cluster) has, for each partition i, the four queue keys above under
// one hash tag, P:{P:q<i>.<j>}:queue and so on, where j is the first number
// that puts partition i in the i-th n-th of the cluster's slots (one
// partition per master of a cluster made by redis-cli --cluster create),
// and the host queue's keys likewise, P:{P:q<i>.<j>}:hq:h:<host> and so on.
// An entry goes to the partition of its URL's host, a hosted entry to that
// of its host's name (the same partition for the same host:port); lease
// IDs read "<i>/<stream ID>:<token>" (hosted: "<i>/h<entry ID>:<token>").
// Lease and LeaseHosts take two round trips, each to every partition at
// once: the first lists the keys of the entries each partition would give
// (push order; for LeaseHosts priority first), the second leases the n
// best of those from the partitions that hold them. So every process takes
// from every partition, none waits on a partition another process owns (a
// process that dies owns nothing), and the order holds across partitions
// as far as the pushing processes' clocks agree: a partitioned Store
// numbers its entries from its clock and a counter, so that entries pushed
// together keep their order. Host "" (Push's entries) has entries in every
// partition; as on one server, it has no ready time (SetHostReady ignores
// it) and no per-host limit.
//
// Queue operations are Lua scripts, so each is atomic however many Stores
// run. An entry stays in the stream, and in the group's pending list once
// delivered, until it is acknowledged (XACK and XDEL). Lease hands out, in
// push (stream ID) order, the delivered entries that are ready again (lease
// expired, or released and due), taking them over with XCLAIM, then new
// entries with XREADGROUP. A lease ID is "<stream ID>:<token>": after a
// takeover or a release the old ID no longer matches, so its Ack or Release
// fails with storage.ErrUnknownLease instead of touching the new holder's
// lease. Lease expiry and not-before times are measured by the server's
// clock, so the hosts' clocks need not agree. Close releases the leases the
// Store still holds, the hosted ones included.
//
// HostLimiter implements limits.Shared: with magpie.SharedLimits in every
// process, the LimitRules' Delay and Parallelism hold for all processes
// together. One script takes a host's slot and its next start at once.
//
// Redis Cluster: pass a ClusterClient to NewFromClient, or
// Options.ClusterAddrs to New, with a prefix without a hash tag. Each
// partition's keys share a slot, so its scripts run on one master; each
// visited shard is one key, hashed whole, so the visited set spreads over
// every slot; HostLimiter's keys carry the host as hash tag. The links of a
// page are checked with one SMISMEMBER per visited shard they fall in,
// pipelined (one round trip to each master), then pushed with one script
// per partition they go to, at once. Pushes and acknowledgements return
// once a replica of their master has them (WAIT), unless the master has no
// replica or Options.NoReplicaWait is set: a master killed after answering
// then loses neither a link (a lost push) nor an acknowledgement (which
// would leave the entry leased by a consumer that no longer holds it until
// the lease expired). A lease or a visited mark lost with a master makes
// at most a second fetch. A prefix with a hash tag ("{crawl1}", the advice
// of earlier versions) keeps every key in one slot, as before.
//
// Every Redis error is returned wrapped; a server that is down gives an
// error, never a panic. Store does not implement storage.QueueNotifier:
// consumers poll Lease.
package redisstore
