package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// HostEntry is an entry to push to a HostQueue: the payload (a marshalled
// Request), the host it is leased under, and its priority.
type HostEntry struct {
	// Host is the key the entry is leased under: a request's URL.Host
	// (host[:port], as the politeness gate is given it). The host "" is
	// the entries whose host the store was not told: those pushed with
	// Queue.Push, and those a store kept from before it knew hosts. They
	// are leased with no per-host limit and no ready time, by their
	// priority and push order, and rank among hosts by that head.
	Host string
	// Priority orders the entries of a host, higher first (as Scrapy's
	// Request.priority); entries of equal priority go in push order. It
	// must fit in an int32 (see ErrPriorityRange).
	Priority int
	// Data is the payload, as given to Queue.Push.
	Data []byte
}

// ErrPriorityRange is returned by PushHosted for a priority outside the
// int32 range, which every store can keep exactly.
var ErrPriorityRange = errors.New("storage: priority outside the int32 range")

// CheckPriority returns an error wrapping ErrPriorityRange for a priority
// that does not fit in an int32.
func CheckPriority(p int) error {
	if p < math.MinInt32 || p > math.MaxInt32 {
		return ErrPriorityRange
	}
	return nil
}

// HeadEntry is a pending entry listed by HostQueue.Head.
type HeadEntry struct {
	Host     string
	Priority int
	Data     []byte
	// NotBefore is the entry's own not-before time (a retry released with
	// one), zero when it has none.
	NotBefore time.Time
	// HostReady is its host's next allowed start (SetHostReady), zero when
	// none is set.
	HostReady time.Time
}

// HostQueue is a Queue that knows each entry's host and priority, so that a
// queue run leases only entries that can start: those of hosts whose next
// allowed start has come and which hold fewer than a given number of
// leased entries. Without it, a run over a FIFO queue has to lease past the
// entries of hosts waiting out their Delay and guess how far (the queue
// look-ahead). The in-memory queue, sqlitestore and redisstore implement
// it; a Colly queue storage does not, and keeps working through Lease.
//
// Everything Queue says holds: at-least-once delivery, leases that expire,
// Release with a not-before time, Len. A released or expired entry goes
// back to its host with its priority, in its place. Lease (without hosts)
// still hands out ready entries in push order, ignoring hosts' ready times.
// Hosts' ready times are kept as durably as the entries: a store reopened
// after a crash (sqlitestore, redisstore) keeps them, so a resumed crawl
// does not burst a host it had just fetched from. A host with no entries
// and a ready time in the past may be forgotten, so the hosts' state stays
// linear in the hosts with work.
type HostQueue interface {
	Queue
	// PushHosted appends entries, all or none, as Push does; ErrQueueFull
	// when they do not all fit, an error wrapping ErrPriorityRange (and
	// nothing pushed) for a priority outside the int32 range.
	PushHosted(ctx context.Context, entries ...HostEntry) error
	// LeaseHosts hands out, for ttl, up to n entries of the hosts ready at
	// now: a host is ready when its next allowed start (SetHostReady) is
	// not after now and it holds fewer than perHost leased entries (by any
	// consumer; perHost <= 0 means no limit). A host gives at most
	// perHost minus its leased entries. Entries waiting for their own
	// not-before time are not handed out. Within a host, the highest
	// priority first and push order among equals; across hosts, the host
	// whose next entry has the highest priority first, and among equal
	// priorities the one whose next entry was pushed first. Entry.Host,
	// Entry.Priority and Entry.HostReady (the host's stored ready time,
	// zero when none) are set; a caller may pass a now a little ahead of the
	// clock and hold each entry until its HostReady. ErrQueueEmpty when nothing can be handed out.
	LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]Entry, error)
	// SetHostReady sets the next allowed start of each host in ready (a
	// host's entries are not handed out by LeaseHosts before it), in one
	// round trip. A time earlier than the one stored leaves it (two
	// consumers setting one host keep the later). The host "" is ignored.
	SetHostReady(ctx context.Context, ready map[string]time.Time) error
	// Head lists up to n pending (not leased) entries, without leasing
	// them: hosts by the priority of their next entry (as LeaseHosts
	// orders them, ignoring ready times and leases), each host's entries
	// in its lease order. It is a view for people (a live page), not a
	// lease: by the time it returns, other consumers may have leased them.
	Head(ctx context.Context, n int) ([]HeadEntry, error)
}

// HostVisitedPusher is VisitedPusher for a HostQueue: a store that keeps
// the visited set and the host queue together (sqlitestore, redisstore)
// checks the links a response yields against the visited set and pushes
// them with their hosts and priorities in one round trip. Use
// PushUnvisitedHosted, which falls back to IsVisited and one PushHosted.
type HostVisitedPusher interface {
	// PushUnvisitedHosted pushes entries[i] for every i whose keys[i] is
	// not in the visited set, atomically, as VisitedPusher.PushUnvisited
	// does, and reports per entry whether it was pushed. It marks nothing
	// visited. ErrPriorityRange as PushHosted.
	PushUnvisitedHosted(ctx context.Context, keys []uint64, entries []HostEntry) ([]bool, error)
}

// PushUnvisitedHosted is PushUnvisited for a HostQueue: it pushes to q the
// entries whose keys are not in the visited set st, in one round trip when
// st and q are the same HostVisitedPusher, and otherwise with st.IsVisited
// per key and one PushHosted. A nil st checks nothing.
func PushUnvisitedHosted(ctx context.Context, st Storage, q HostQueue, keys []uint64, entries []HostEntry) ([]bool, error) {
	if len(keys) != len(entries) {
		return nil, fmt.Errorf("%w: %d keys, %d entries", ErrLengthMismatch, len(keys), len(entries))
	}
	if len(entries) == 0 {
		return nil, nil
	}
	for _, e := range entries {
		if err := CheckPriority(e.Priority); err != nil {
			return nil, fmt.Errorf("%w: %d", err, e.Priority)
		}
	}
	if vp, ok := q.(HostVisitedPusher); ok && st != nil && sameStore(st, q) {
		return vp.PushUnvisitedHosted(ctx, keys, entries)
	}
	return pushNotVisited(ctx, st, keys, entries, q.PushHosted)
}
