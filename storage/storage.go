// Package storage defines where a crawl keeps its state: the visited set and
// cookies (Storage, with the atomic VisitedSet and the error-returning
// CookieStore as optional upgrades), and the frontier of pending requests
// (Queue). InMemoryStorage and the in-memory queue are the defaults; the
// sub-packages sqlitestore and redisstore persist the same interfaces, and
// storagetest is the conformance suite every backend runs.
package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

var (
	// ErrQueueEmpty is returned by Queue.Lease when no entry is ready: the
	// queue is empty, every entry is leased, or every entry waits for its
	// not-before time.
	ErrQueueEmpty = errors.New("storage: queue empty")
	// ErrQueueFull is returned by Queue.Push when the queue has reached its
	// maximum size. Its text is Colly's.
	ErrQueueFull = errors.New("Queue MaxSize reached")
	// ErrUnknownLease is returned by Ack and Release for an ID that is not
	// currently leased (already acknowledged, or its lease expired and was
	// taken over).
	ErrUnknownLease = errors.New("storage: unknown or expired lease")
	// ErrClosed is returned by every method of a store after Close.
	ErrClosed = errors.New("storage: closed")
)

// Storage is Colly's interface for the visited set and cookies; a Colly
// storage works with magpie unchanged. Implementations must be safe for
// concurrent use. A store that also implements VisitedSet gets an atomic
// check-and-mark; otherwise the Collector serialises IsVisited+Visited
// in-process, which is exact for one process only.
type Storage interface {
	// Init prepares the storage; the Collector calls it once from SetStorage.
	Init() error
	// Visited marks a request ID visited.
	Visited(requestID uint64) error
	// IsVisited reports whether a request ID is visited.
	IsVisited(requestID uint64) (bool, error)
	// Cookies returns the cookies to send to u, as newline-joined Set-Cookie strings.
	Cookies(u *url.URL) string
	// SetCookies stores cookies received from u, in the same format.
	SetCookies(u *url.URL, cookies string)
}

// VisitedSet is the atomic visited set. Two callers, in one process or many,
// can never both be told that they added the same ID.
type VisitedSet interface {
	// AddVisited marks each ID visited and reports, per ID and in order,
	// whether this call added it (true) or it was already present (false).
	AddVisited(ctx context.Context, ids ...uint64) ([]bool, error)
	// RemoveVisited forgets IDs, so that a request whose fetch failed can be
	// admitted again. Absent IDs are ignored.
	RemoveVisited(ctx context.Context, ids ...uint64) error
}

// CookieStore is Storage's cookie half with errors returned, for stores that
// can fail (disk, network). The Collector prefers it when present.
type CookieStore interface {
	// GetCookies returns the cookies for u, as in Storage.Cookies.
	GetCookies(ctx context.Context, u *url.URL) (string, error)
	// PutCookies stores cookies for u, as in Storage.SetCookies.
	PutCookies(ctx context.Context, u *url.URL, cookies string) error
}

// Entry is one leased queue entry.
type Entry struct {
	// ID identifies the lease; pass it to Ack or Release.
	ID string
	// Data is the payload given to Push (a marshalled Request).
	Data []byte
	// Deliveries counts how many times this entry has been leased, this time included.
	Deliveries int
	// Host and Priority are the entry's, as pushed with HostQueue.PushHosted;
	// set by HostQueue.LeaseHosts (and by Lease on a HostQueue), zero
	// otherwise.
	Host     string
	Priority int
	// HostReady is the entry's host's next allowed start (SetHostReady) as
	// LeaseHosts found it, zero when none is set; a run holds the entry
	// until then (LeaseHosts may be asked for hosts ready a little ahead).
	HostReady time.Time
}

// QueueLen counts a queue's entries.
type QueueLen struct {
	// Ready entries can be leased now.
	Ready int
	// Delayed entries wait for a not-before time.
	Delayed int
	// Leased entries are held by a consumer and not yet acknowledged.
	Leased int
}

// Pending is Ready+Delayed: entries not yet handed to a consumer.
func (l QueueLen) Pending() int { return l.Ready + l.Delayed }

// Total is every entry not yet acknowledged.
func (l QueueLen) Total() int { return l.Ready + l.Delayed + l.Leased }

// Queue is the frontier of pending requests, with at-least-once delivery: a
// leased entry stays in the store until Ack, goes back on Release, and goes
// back by itself when its lease expires (so a crashed consumer's entries are
// taken over). Entries are leased in push order among those ready.
// Implementations must be safe for concurrent use; errors are returned, never
// swallowed; "nothing ready" is ErrQueueEmpty, never an empty success.
type Queue interface {
	// Push appends entries, all or none.
	Push(ctx context.Context, data ...[]byte) error
	// Lease hands out up to n ready entries for ttl. It returns ErrQueueEmpty
	// when none is ready; it never blocks waiting for one.
	Lease(ctx context.Context, n int, ttl time.Duration) ([]Entry, error)
	// Ack removes leased entries for good.
	Ack(ctx context.Context, ids ...string) error
	// Release returns a leased entry to the queue, ready at notBefore (the
	// zero time: at once).
	Release(ctx context.Context, id string, notBefore time.Time) error
	// Len counts entries.
	Len(ctx context.Context) (QueueLen, error)
	// Close releases the store's resources; entries persist in durable stores.
	Close() error
}

// LeaseReclaimer is implemented by networked queues that can take back the
// leases a consumer was granted but never heard of, because the reply of its
// Lease was lost when the connection broke. A queue run calls it after a
// failed Lease; without it such an entry waits for its lease to expire
// before any consumer gets it.
type LeaseReclaimer interface {
	// ReleaseUnheld releases, ready now, every entry leased to this
	// consumer except those whose lease IDs are in held.
	ReleaseUnheld(ctx context.Context, held []string) error
}

// QueueNotifier is implemented by queues that can tell a waiting consumer
// when an entry may have become ready, so that consumers need not poll.
type QueueNotifier interface {
	// Notify returns a channel that receives a value after a Push, a Release
	// or an expired lease. Sends never block; one value may stand for many events.
	Notify() <-chan struct{}
}

// ErrUnsupported is returned by RenewLeases for a queue that cannot extend
// its leases (it does not implement LeaseRenewer).
var ErrUnsupported = errors.New("storage: operation not supported by this store")

// LeaseRenewer is implemented by queues that can extend leases in place, so
// that a consumer holding entries longer than one lease (entries waiting
// behind a slow host) keeps them without their expiring and being fetched
// twice, while a crashed consumer's entries still come back one ttl after
// its last renewal. The in-memory queue, sqlitestore and redisstore
// implement it.
type LeaseRenewer interface {
	// Renew extends each lease in ids to ttl from now, in one round trip.
	// Leases no longer held (acknowledged, released, or expired and taken
	// over) are skipped and reported in an error wrapping ErrUnknownLease;
	// the others are renewed all the same. A lease that expired but was not
	// taken over yet is renewed.
	Renew(ctx context.Context, ttl time.Duration, ids ...string) error
}

// BatchReleaser is implemented by queues that release many leases in one
// round trip. Use ReleaseBatch, which falls back to a loop of Release.
type BatchReleaser interface {
	// ReleaseBatch releases each lease in ids as Release does, all ready at
	// notBefore. Leases not held are skipped and reported in an error
	// wrapping ErrUnknownLease; the others are released all the same.
	ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error
}

// VisitedPusher is implemented by stores that keep the visited set and the
// queue together (sqlitestore, redisstore), so that the links a response
// yields are checked against the visited set and pushed in one round trip.
// Use PushUnvisited, which falls back to IsVisited and one Push.
type VisitedPusher interface {
	// PushUnvisited pushes data[i] for every i whose keys[i] is not in the
	// visited set, atomically (all of those or none), and reports per entry
	// whether it was pushed. It marks nothing visited. keys and data have
	// the same length. A queue with a maximum size returns ErrQueueFull,
	// pushing nothing, when the unvisited entries do not all fit.
	PushUnvisited(ctx context.Context, keys []uint64, data [][]byte) ([]bool, error)
}

// RenewLeases renews ids on q for ttl; it returns ErrUnsupported when q is
// not a LeaseRenewer.
func RenewLeases(ctx context.Context, q Queue, ttl time.Duration, ids ...string) error {
	r, ok := q.(LeaseRenewer)
	if !ok {
		return ErrUnsupported
	}
	if len(ids) == 0 {
		return nil
	}
	return r.Renew(ctx, ttl, ids...)
}

// ReleaseBatch releases ids on q, ready at notBefore, in one round trip when
// q is a BatchReleaser and with one Release per ID otherwise. Every ID is
// tried; the errors are joined (ErrUnknownLease for leases not held).
func ReleaseBatch(ctx context.Context, q Queue, notBefore time.Time, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if b, ok := q.(BatchReleaser); ok {
		return b.ReleaseBatch(ctx, notBefore, ids...)
	}
	var errs []error
	for _, id := range ids {
		if err := q.Release(ctx, id, notBefore); err != nil {
			errs = append(errs, err)
			if !errors.Is(err, ErrUnknownLease) {
				// The store is failing: the rest would fail the same way.
				break
			}
		}
	}
	return errors.Join(errs...)
}

// ErrLengthMismatch is returned by PushUnvisited when keys and data differ
// in length.
var ErrLengthMismatch = errors.New("storage: keys and data differ in length")

// PushUnvisited pushes to q the entries of data whose keys are not in the
// visited set st, and reports per entry whether it was pushed. When st and q
// are the same store and it implements VisitedPusher, that takes one round
// trip; otherwise st.IsVisited is asked per key and the unvisited entries
// are pushed with one Push. A nil st checks nothing and pushes everything.
func PushUnvisited(ctx context.Context, st Storage, q Queue, keys []uint64, data [][]byte) ([]bool, error) {
	if len(keys) != len(data) {
		return nil, fmt.Errorf("%w: %d keys, %d entries", ErrLengthMismatch, len(keys), len(data))
	}
	if len(data) == 0 {
		return nil, nil
	}
	if vp, ok := q.(VisitedPusher); ok && st != nil && sameStore(st, q) {
		return vp.PushUnvisited(ctx, keys, data)
	}
	return pushNotVisited(ctx, st, keys, data, q.Push)
}

// pushNotVisited pushes with push, in one call, the items whose keys st
// has not visited (every item when st is nil), and reports which it
// pushed: the fallback of PushUnvisited and PushUnvisitedHosted.
func pushNotVisited[T any](ctx context.Context, st Storage, keys []uint64, items []T, push func(context.Context, ...T) error) ([]bool, error) {
	pushed := make([]bool, len(items))
	todo := make([]T, 0, len(items))
	for i, k := range keys {
		if st != nil {
			seen, err := st.IsVisited(k)
			if err != nil {
				return nil, err
			}
			if seen {
				continue
			}
		}
		pushed[i] = true
		todo = append(todo, items[i])
	}
	if len(todo) == 0 {
		return pushed, nil
	}
	if err := push(ctx, todo...); err != nil {
		return nil, err
	}
	return pushed, nil
}

// sameStore reports whether st and q are one object; comparing interface
// values of an uncomparable dynamic type would panic, hence the recover.
func sameStore(st Storage, q Queue) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return any(st) == any(q)
}

var (
	// ErrStoreReset is wrapped by the error a store returns when it finds
	// that it lost the contents it held when this client opened it: a Redis
	// server restarted without persistence, or the crawl's keys deleted by
	// someone else. The pending entries, the leases and the visited set are
	// gone, and retrying cannot bring them back, so a queue run stops and
	// returns it rather than report an empty queue as a finished crawl.
	ErrStoreReset = errors.New("storage: store was reset and lost its contents")
	// ErrStoreUnusable is wrapped by the error a store returns when it
	// cannot be used again without an operator: its data is damaged
	// (SQLite's SQLITE_CORRUPT, SQLITE_NOTADB), or its file became
	// read-only or cannot be opened. Retrying cannot help, so a queue run
	// stops and returns it instead of waiting for the store as for an
	// outage. The store's own error stays reachable with errors.As.
	ErrStoreUnusable = errors.New("storage: store unusable")
)

// ResetDetector is implemented by stores that can lose their contents
// without their clients hearing of it (a Redis server restarted empty). A
// queue run asks it before it takes an empty queue for a finished crawl,
// after a storage outage ends, and when a lease it holds is unknown to the
// store, so that a wiped store ends the run with ErrStoreReset instead of a
// silent nil.
type ResetDetector interface {
	// CheckReset returns an error wrapping ErrStoreReset when the store
	// lost the contents it held when this client opened it, nil when it
	// did not, and another error when it cannot tell (the store is down).
	CheckReset(ctx context.Context) error
}

// CheckReset asks q whether it was reset (see ResetDetector); a queue that
// is not a ResetDetector never reports one.
func CheckReset(ctx context.Context, q Queue) error {
	if d, ok := q.(ResetDetector); ok {
		return d.CheckReset(ctx)
	}
	return nil
}
