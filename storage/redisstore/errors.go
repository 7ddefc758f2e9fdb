package redisstore

import "errors"

// ErrInvalidArgument is returned for bad options (an empty Addr, a nil
// client, negative sizes) and for a Lease with n < 1 or ttl <= 0.
var ErrInvalidArgument = errors.New("redisstore: invalid argument")

// ErrNotInitialized is returned by the methods of a Storage used before its
// Init connected it.
var ErrNotInitialized = errors.New("redisstore: Storage used before Init")

// ErrLayoutMismatch is returned by New and NewFromClient when
// Options.Partitions or Options.VisitedShards differs from the value the
// crawl recorded in Redis when its first Store opened it: a host's entries
// must go to the same partition, and a URL's mark to the same shard, in
// every process.
var ErrLayoutMismatch = errors.New("redisstore: partitions or visited shards differ from the crawl's")

// ErrNotReplicated is returned by a push to a cluster whose master has
// replicas when none of them confirmed the write in time: the entries may
// be lost if that master dies now, so the push is reported failed and a
// queue run tries it again (a second copy of an entry is deduplicated by
// the visited set when it is leased).
var ErrNotReplicated = errors.New("redisstore: push not confirmed by a replica")
