// Package sqlitestore is a durable storage backend in one SQLite file
// (modernc.org/sqlite, pure Go, no cgo). A Store implements storage.Storage,
// storage.VisitedSet, storage.CookieStore, storage.Queue,
// storage.HostQueue and storage.QueueNotifier, so one file holds a crawl's
// visited set, cookies and frontier, and a crawl resumes where it stopped
// after a crash or a restart.
//
// The file runs in WAL mode with synchronous=NORMAL: a committed transaction
// survives a process crash, and the last transactions before a power loss may
// be rolled back but the file stays consistent. Every write is one
// transaction, so a batch (Push of many entries, AddVisited of many IDs) is
// all or nothing and costs one commit.
//
// Several Stores, in one process or several, may open the same file: writes
// are serialised by SQLite's lock (each Store waits up to its busy timeout),
// AddVisited stays exact across them, and a queue entry is leased to one
// Store at a time. Leases carry the leasing Store's owner ID; when a Store is
// opened it returns to the queue the leases of owners on this host whose
// process no longer exists, and any expired lease is handed out again by
// Lease anyway. Notify only reports events of the Store's own process: a
// consumer sharing a file with other processes should also poll.
//
// A Store's HostLimiter (limits.Shared, for magpie.SharedLimits) keeps the
// LimitRules' per-host Delay and Parallelism across every process on the
// file: each Acquire is one immediate transaction that reads the host's
// next allowed start and its live slots and takes both or neither, so two
// processes are never both granted. A slot is a lease that expires after
// the slot TTL, so the slots of a process that died come back by themselves.
//
// As a storage.HostQueue, a Store keeps each entry's host and priority and
// a row per host with work (its next allowed start, its leased entries, its
// first pending entry), so LeaseHosts hands out, in one transaction, the
// entries of hosts that may start now, best head first, without reading
// past the entries of hosts that wait; hosts' ready times are in the file,
// so a resumed crawl keeps them. See queue_hosts.go and hostbook.go.
//
// Schema (PRAGMA user_version 4; an older file is migrated on Open, in one
// transaction):
//
//	visited (id INTEGER PRIMARY KEY)            -- request ID, uint64 bits as int64
//	queue   (seq INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB, not_before INTEGER,
//	         lease_until INTEGER NULL, lease_token INTEGER NULL, lease_owner INTEGER NULL,
//	         deliveries INTEGER, host_id INTEGER, rank INTEGER)  -- times are Unix nanoseconds;
//	                                            -- host_id is queue_hosts.id, rank minus the priority
//	cookies (host TEXT PRIMARY KEY, data TEXT)  -- newline-joined Set-Cookie lines
//	owners  (owner INTEGER PRIMARY KEY, pid INTEGER, host TEXT, started INTEGER)
//	hosts   (host TEXT PRIMARY KEY, next_start INTEGER)  -- Unix µs
//	slots   (host TEXT, token INTEGER, expires INTEGER,  -- Unix µs
//	         PRIMARY KEY (host, token))
//	pages   (id INTEGER PRIMARY KEY, due INTEGER, data BLOB)
//	queue_hosts (id INTEGER PRIMARY KEY, host TEXT UNIQUE, ready_at INTEGER, -- id 0: host ""
//	         parked INTEGER, leased INTEGER, head_rank INTEGER NULL, head_seq INTEGER NULL)
//
// hosts and slots hold the HostLimiter's state: a host's next allowed
// request start, and one row per request in flight. Version 2 added slots
// and dropped hosts.in_flight, which nothing had written; version 3 added
// pages (recrawl state); version 4 added the queue's host_id and rank, and
// queue_hosts (HostQueue's hosts; a version 3 file's entries get the host
// "" and the priority 0, as Push gives them).
package sqlitestore

import _ "modernc.org/sqlite" // registers the "sqlite" driver
