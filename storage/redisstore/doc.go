// Package redisstore keeps a crawl's state in Redis so that several
// processes, on one host or many, share one crawl: an exact visited set, the
// cookies, and a frontier queue with at-least-once delivery. A Store
// implements storage.Storage, storage.VisitedSet, storage.CookieStore and
// storage.Queue.
//
// Keys, for prefix P:
//
//	P:v:<shard>   SET of visited IDs (uint64 bits as a decimal int64), sharded
//	              so each set stays an intset: ~8 bytes per ID
//	P:queue       STREAM of entries (fields d = data, n = earlier deliveries),
//	              consumer group "magpie"
//	P:leases      HASH stream ID -> "<token>:<deliveries>" of the current lease
//	P:expiry      ZSET stream ID scored by lease expiry (server ms)
//	P:delayed     ZSET of released entries scored by their not-before time
//	P:c:<host>    STRING of a host's cookies (newline-joined Set-Cookie lines)
//
// Queue operations are Lua scripts, so each is atomic however many Stores
// run. Lease first moves due delayed entries back to the stream, then takes
// over entries whose lease expired (XCLAIM), then reads new ones
// (XREADGROUP). A lease ID is "<stream ID>:<token>": after a takeover the old
// holder's ID no longer matches, so its Ack or Release fails with
// storage.ErrUnknownLease instead of removing the new holder's entry. Lease
// expiry and not-before times are measured by the server's clock, so the
// hosts' clocks need not agree.
//
// Every Redis error is returned wrapped; a server that is down gives an
// error, never a panic. Store does not implement storage.QueueNotifier:
// consumers poll Lease.
package redisstore
