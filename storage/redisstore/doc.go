// Package redisstore keeps a crawl's state in Redis so that several
// processes, on one host or many, share one crawl: an exact visited set, the
// cookies, and a frontier queue with at-least-once delivery. A Store
// implements storage.Storage, storage.VisitedSet, storage.CookieStore and
// storage.Queue.
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
//	P:slots:<host>    ZSET of HostLimiter's parallelism slots, scored by expiry (ms)
//	P:next:<host>     STRING, HostLimiter: the host's next allowed start (server µs)
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
// Store still holds.
//
// HostLimiter implements limits.Shared: with magpie.SharedLimits in every
// process, the LimitRules' Delay and Parallelism hold for all processes
// together. One script takes a host's slot and its next start at once.
//
// In Redis Cluster the queue's keys must share a slot: put a hash tag in
// the prefix ("{crawl1}").
//
// Every Redis error is returned wrapped; a server that is down gives an
// error, never a panic. Store does not implement storage.QueueNotifier:
// consumers poll Lease.
package redisstore
