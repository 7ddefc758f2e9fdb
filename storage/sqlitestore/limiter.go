package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// DefaultSlotTTL is how long a parallelism slot survives a process that
// dies without releasing it.
const DefaultSlotTTL = 2 * time.Minute

// DefaultSlotPoll is how long Acquire tells a caller to wait when every
// parallelism slot of a host is taken: other processes' releases are not
// signalled, so the caller asks again after this.
const DefaultSlotPoll = 10 * time.Millisecond

// releaseTimeout bounds a release's delete; past it the slot is left to
// expire.
const releaseTimeout = 5 * time.Second

// HostLimiter is politeness shared by every process of a crawl on one file:
// per host, a least gap between request starts (hosts.next_start) and a
// most requests in flight (leased rows of slots), both taken in one
// immediate transaction, so two Stores on the file, in one process or
// several, are never both granted against the same limit. It implements
// limits.Shared: pass it to magpie.SharedLimits (or
// limits.Limiter.SetShared) in every process. It is safe for concurrent use
// and needs no Close (closing its Store makes it fail with
// storage.ErrClosed). Times are the processes' wall clocks in µs, so every
// process must run on the same machine (as they do when they share a file).
// The zero value is not usable: call Store.HostLimiter.
type HostLimiter struct {
	s       *Store
	slotTTL time.Duration
	poll    time.Duration
	onGrant func(host string, at time.Time)
	now     func() time.Time // the clock; tests move it
}

var _ limits.Shared = (*HostLimiter)(nil)

// HostLimiter returns a host limiter on s's file. slotTTL <= 0 means
// DefaultSlotTTL; it must exceed the longest request, or a slot comes back
// while its request still runs.
func (s *Store) HostLimiter(slotTTL time.Duration) *HostLimiter {
	if slotTTL <= 0 {
		slotTTL = DefaultSlotTTL
	}
	return &HostLimiter{s: s, slotTTL: slotTTL, poll: DefaultSlotPoll, now: time.Now}
}

// OnGrant sets f to be called after every start the limiter grants, with the
// host and the grant's time (read while holding the file's write lock, so
// grants of all processes are ordered and spaced on it), for metrics and
// tests. Set it before the limiter is used; nil turns it off.
func (h *HostLimiter) OnGrant(f func(host string, at time.Time)) { h.onGrant = f }

// errSlotsFull ends an Acquire transaction that must not grant because
// every slot is taken; it never leaves this file.
var errSlotsFull = errors.New("slots full")

// Acquire implements limits.Shared in one immediate transaction: if host's
// delay since the last start (by any Store on the file) has passed and it
// has fewer than parallelism live slots (parallelism <= 0: no limit), it
// takes a slot, moves the next start to now+delay (delay <= 0: leaves it)
// and returns a release to call when the request ends; else it returns how
// long to wait before asking again: until the next start, or DefaultSlotPoll
// when the slots are full. It blocks only on the file's lock (at most the
// busy timeout). release frees the slot even after ctx has ended (it has its
// own 5 s timeout) and ignores errors: an unreleased slot expires after the
// slot TTL.
func (h *HostLimiter) Acquire(ctx context.Context, host string, delay time.Duration, parallelism int) (release func(), wait time.Duration, err error) {
	if err := h.s.check(); err != nil {
		return nil, 0, err
	}
	var token int64
	var now, next int64
	err = h.s.tx(ctx, func(tx *sql.Tx) error {
		// Read the clock under the write lock: every grant on the file is
		// then ordered by it, whatever the lock wait was.
		now = h.now().UnixMicro()
		err := tx.QueryRowContext(ctx, "SELECT next_start FROM hosts WHERE host = ?", host).Scan(&next)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if next > now {
			return nil // nothing written; commit is a no-op
		}
		if parallelism > 0 {
			if _, err := tx.ExecContext(ctx, "DELETE FROM slots WHERE host = ? AND expires <= ?", host, now); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM slots WHERE host = ?", host).Scan(&n); err != nil {
				return err
			}
			if n >= parallelism {
				// Roll back the expiry sweep too: it is redone next time.
				return errSlotsFull
			}
			token = rand.Int64()
			if _, err := tx.ExecContext(ctx, "INSERT INTO slots (host, token, expires) VALUES (?, ?, ?)",
				host, token, now+h.slotTTL.Microseconds()); err != nil {
				return err
			}
		}
		if delay > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO hosts (host, next_start) VALUES (?1, ?2)
				ON CONFLICT (host) DO UPDATE SET next_start = ?2`, host, now+delay.Microseconds()); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errSlotsFull):
		return nil, h.poll, nil
	case err != nil:
		return nil, 0, h.s.wrap("host limiter acquire", err)
	case next > now:
		return nil, time.Duration(next-now) * time.Microsecond, nil
	}
	if h.onGrant != nil {
		h.onGrant(host, time.UnixMicro(now))
	}
	if parallelism <= 0 {
		return func() {}, 0, nil
	}
	return func() {
		// A fresh context: the slot must be freed even when the request's
		// context has ended. If this fails the slot expires.
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_, _ = h.s.db.ExecContext(ctx, "DELETE FROM slots WHERE host = ? AND token = ?", host, token)
	}, 0, nil
}

// Allow takes host's next start under delay alone, with no parallelism
// limit: it returns 0 when the request may start now, else how long to wait
// before asking again. delay <= 0 always allows. It shares its state with
// Acquire.
func (h *HostLimiter) Allow(ctx context.Context, host string, delay time.Duration) (time.Duration, error) {
	if delay <= 0 {
		return 0, h.s.check()
	}
	_, wait, err := h.Acquire(ctx, host, delay, 0)
	return wait, err
}
