package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// A lease's end: Ack, Release, ReleaseBatch, and Renew, which puts it off.

// Ack deletes leased entries for good, in one transaction. IDs whose lease
// is no longer held (acknowledged already, or expired and leased again) are
// skipped and reported in an error wrapping storage.ErrUnknownLease; the
// others are acknowledged all the same. An expired lease not yet taken over
// can still be acknowledged.
func (s *Store) Ack(ctx context.Context, ids ...string) error {
	if err := s.check(); err != nil {
		return err
	}
	var unknown []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		unknown, err = s.ackIn(ctx, tx, ids)
		return err
	})
	return s.ackResult(unknown, err)
}

// ackIn deletes the entries of ids within tx and returns the IDs whose
// lease is not held, in the order of ids. The IDs are deleted a chunk at a
// time, whatever Lease gave them, trusting the host each ID names (IDs are this
// package's, and the token, random, is checked); a chunk that holds IDs of
// leases not held (unknown, or expired and swept back among the
// candidates) deletes nothing and is taken one ID at a time.
func (s *Store) ackIn(ctx context.Context, tx *sql.Tx, ids []string) ([]string, error) {
	type lease struct {
		seq, token, host int64
		at               int // index in ids
	}
	leases := make([]lease, 0, len(ids))
	notHeld := make([]bool, len(ids))
	for i, id := range ids {
		seq, token, host, ok := parseLeaseID(id)
		if !ok {
			notHeld[i] = true
			continue
		}
		leases = append(leases, lease{seq, token, host, i})
	}
	var b hostBook
	args := make([]any, 0, 2*chunkSizes[0])
	err := eachChunk(len(leases), func(start, size, i int) error {
		chunk := leases[start : start+size]
		if size > 1 {
			args = args[:0]
			for _, l := range chunk {
				args = append(args, l.seq, l.token)
			}
			done, err := s.ackChunk(ctx, tx, i, args)
			if err != nil {
				return err
			}
			if done {
				for _, l := range chunk {
					c := b.at(l.host)
					c.leased--
					c.removed = true
				}
				return nil
			}
		}
		for _, l := range chunk {
			held, err := s.ackOne(ctx, tx, &b, l.seq, l.token, l.host)
			if err != nil {
				return err
			}
			notHeld[l.at] = !held
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var unknown []string
	for i, id := range ids {
		if notHeld[i] {
			unknown = append(unknown, id)
		}
	}
	return unknown, s.flush(ctx, tx, &b)
}

// ackChunk deletes the held leases of a chunk (args: seq and token of each)
// and reports whether every one was; if not, it deleted none.
func (s *Store) ackChunk(ctx context.Context, tx *sql.Tx, i int, args []any) (bool, error) {
	n, err := affected(s.exec(ctx, tx, ackChunks[i], args...))
	if err != nil {
		return false, err
	}
	switch n {
	case 0:
		return false, nil
	case int64(chunkSizes[i]):
		return true, nil
	}
	return false, fmt.Errorf("sqlitestore: ack deleted %d of a chunk of %d", n, chunkSizes[i])
}

// ackOne deletes the entry seq leased with token, and reports whether its
// lease was held.
func (s *Store) ackOne(ctx context.Context, tx *sql.Tx, b *hostBook, seq, token, host int64) (bool, error) {
	n, err := affected(s.exec(ctx, tx, ackLeased, seq, token, host))
	if err != nil {
		return false, err
	}
	c := b.at(host)
	if n > 0 {
		c.leased--
		c.removed = true
		return true, nil
	}
	// An expired lease swept back among the candidates, or no lease.
	if n, err = affected(s.exec(ctx, tx, ackSwept, seq, token, host)); err != nil || n == 0 {
		return false, err
	}
	c.lose()
	c.removed = true
	return true, nil
}

// Statements of Ack: ?1 seq, ?2 token, ?3 host ID. The host is the lease
// ID's, so that the common case, a held lease, is known for one without
// reading the row back (RETURNING doubled the cost of an Ack).
const (
	ackLeased = "DELETE FROM queue WHERE seq = ?1 AND lease_token = ?2 AND +host_id = ?3 AND lease_until IS NOT NULL"
	ackSwept  = "DELETE FROM queue WHERE seq = ?1 AND lease_token = ?2 AND +host_id = ?3"
)

// affected is the count of rows a statement's result reports.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ackResult is Ack's error for a transaction's outcome.
func (s *Store) ackResult(unknown []string, err error) error {
	if err != nil {
		return s.wrap("ack", err)
	}
	if len(unknown) > 0 {
		return fmt.Errorf("sqlitestore: ack %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// Release returns a leased entry to the queue, ready at notBefore (the zero
// time: at once). It keeps its place in push order. It returns
// storage.ErrUnknownLease when the lease is no longer held.
func (s *Store) Release(ctx context.Context, id string, notBefore time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	unknown, err := s.releaseIDs(ctx, []string{id}, notBefore)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("sqlitestore: release %q: %w", id, storage.ErrUnknownLease)
	}
	return nil
}

// Statements of Release: ?1 not-before, ?2 seq, ?3 token, ?4 host ID. A held lease
// (leased) and an expired one swept back among the candidates are told
// apart for the host's leased count.
const (
	releaseHeld = `UPDATE queue SET lease_until = NULL, lease_token = NULL, lease_owner = NULL, not_before = ?1
		WHERE seq = ?2 AND lease_token = ?3 AND host_id = ?4 AND lease_until IS NOT NULL RETURNING rank`
	releaseSwept = `UPDATE queue SET lease_token = NULL, lease_owner = NULL, not_before = ?1
		WHERE seq = ?2 AND lease_token = ?3 AND host_id = ?4 RETURNING rank`
)

// releaseIDs releases the leases of ids in one transaction, ready at
// notBefore, and returns those not held.
func (s *Store) releaseIDs(ctx context.Context, ids []string, notBefore time.Time) ([]string, error) {
	var nb int64
	if notBefore.After(time.Unix(0, 0)) {
		nb = unixNano(notBefore)
	}
	var unknown []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		unknown = unknown[:0]
		var b hostBook
		held, swept := tx.StmtContext(ctx, s.prepared[releaseHeld]), tx.StmtContext(ctx, s.prepared[releaseSwept])
		for _, id := range ids {
			seq, token, host, ok := parseLeaseID(id)
			if !ok {
				unknown = append(unknown, id)
				continue
			}
			var rank int64
			err := held.QueryRowContext(ctx, nb, seq, token, host).Scan(&rank)
			wasLeased := err == nil
			if errors.Is(err, sql.ErrNoRows) {
				err = swept.QueryRowContext(ctx, nb, seq, token, host).Scan(&rank)
			}
			switch {
			case errors.Is(err, sql.ErrNoRows):
				unknown = append(unknown, id)
				continue
			case err != nil:
				return err
			}
			c := b.at(host)
			if wasLeased {
				c.leased--
			} else {
				c.lose() // it was a candidate; delayed now, perhaps
			}
			if nb == 0 {
				b.gain(host, rank, seq)
			}
		}
		return s.flush(ctx, tx, &b)
	})
	if err != nil {
		return nil, s.wrap("release", err)
	}
	if notBefore.After(time.Now()) {
		s.wake.wakeAt(notBefore)
	} else {
		s.wake.signal()
	}
	return unknown, nil
}

// Renew implements storage.LeaseRenewer: each held lease runs ttl from now,
// all in one transaction. An expired lease not yet taken over is renewed.
func (s *Store) Renew(ctx context.Context, ttl time.Duration, ids ...string) error {
	if err := s.check(); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("sqlitestore: renew(%v): %w", ttl, ErrInvalidArgument)
	}
	if len(ids) == 0 {
		return nil
	}
	until := time.Now().Add(ttl)
	var unknown []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		unknown = unknown[:0]
		var b hostBook
		held, swept := tx.StmtContext(ctx, s.prepared[renewHeld]), tx.StmtContext(ctx, s.prepared[renewSwept])
		for _, id := range ids {
			seq, token, host, ok := parseLeaseID(id)
			if !ok {
				unknown = append(unknown, id)
				continue
			}
			n, err := affected(held.ExecContext(ctx, until.UnixNano(), seq, token, host))
			if err == nil && n == 0 {
				n, err = affected(swept.ExecContext(ctx, until.UnixNano(), seq, token, host, s.owner))
				if n > 0 {
					b.lease(host, true)
				}
			}
			if err != nil {
				return err
			}
			if n == 0 {
				unknown = append(unknown, id)
			}
		}
		return s.flush(ctx, tx, &b)
	})
	if err != nil {
		return s.wrap("renew", err)
	}
	s.wake.wakeAt(until)
	if len(unknown) > 0 {
		return fmt.Errorf("sqlitestore: renew %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}

// Statements of Renew: ?1 lease end, ?2 seq, ?3 token, ?4 host ID, ?5 owner.
// An expired lease swept back among the candidates is leased again.
const (
	renewHeld = `UPDATE queue SET lease_until = ?1
		WHERE seq = ?2 AND lease_token = ?3 AND host_id = ?4 AND lease_until IS NOT NULL`
	renewSwept = `UPDATE queue SET lease_until = ?1, lease_owner = ?5
		WHERE seq = ?2 AND lease_token = ?3 AND host_id = ?4 AND lease_until IS NULL`
)

// ReleaseBatch implements storage.BatchReleaser in one transaction: each
// held lease goes back to the queue in its place, ready at notBefore.
func (s *Store) ReleaseBatch(ctx context.Context, notBefore time.Time, ids ...string) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	unknown, err := s.releaseIDs(ctx, ids, notBefore)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("sqlitestore: release %q: %w", unknown, storage.ErrUnknownLease)
	}
	return nil
}
