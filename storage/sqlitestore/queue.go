package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// Push appends entries in one transaction: all are stored or none. With
// WithMaxSize it returns storage.ErrQueueFull when they do not all fit.
func (s *Store) Push(ctx context.Context, data ...[]byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.checkRoom(ctx, tx, len(data)); err != nil {
			return err
		}
		return s.insertPlain(ctx, tx, data)
	})
	if err != nil {
		return s.wrap("push", err)
	}
	s.wake.signal()
	return nil
}

// insertPlain appends data under the host "" with the priority 0, and
// makes the first its host's head if it has none.
func (s *Store) insertPlain(ctx context.Context, tx *sql.Tx, data [][]byte) error {
	if len(data) == 0 {
		return nil
	}
	first := int64(-1)
	args := make([]any, 0, chunkSizes[0])
	err := eachChunk(len(data), func(start, size, i int) error {
		args = args[:0]
		for _, d := range data[start : start+size] {
			if d == nil {
				d = []byte{} // the column is NOT NULL; nil and empty mean the same payload
			}
			args = append(args, d)
		}
		last, err := lastID(s.exec(ctx, tx, insertPlainChunks[i], args...))
		if first < 0 {
			// The rows of one INSERT take consecutive seqs (AUTOINCREMENT,
			// one writer).
			first = last - int64(size) + 1
		}
		return err
	})
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, tx, pushedPlain, first)
	return err
}

// pushedPlain makes the entry seq ?1, the first of a Push, the head of the
// host "" (ID 0) if it has none, creating the host's row.
const pushedPlain = `INSERT INTO queue_hosts (id, host, head_rank, head_seq) VALUES (0, '', 0, ?1)
	ON CONFLICT (id) DO UPDATE SET head_rank = 0, head_seq = ?1
		WHERE head_seq IS NULL OR (0, ?1) < (head_rank, head_seq)`

// visitedAmong returns the keys that are in the visited set: a few with the
// prepared one-key lookup, many with one IN query per chunk (the per-query
// cost of database/sql would dominate a page with thousands of links).
func visitedAmong(ctx context.Context, tx *sql.Tx, lookup *sql.Stmt, keys []uint64) (map[int64]bool, error) {
	seen := make(map[int64]bool, len(keys))
	if len(keys) <= smallVisitedBatch {
		st := tx.StmtContext(ctx, lookup)
		for _, k := range keys {
			var one int
			switch err := st.QueryRowContext(ctx, int64(k)).Scan(&one); {
			case err == nil:
				seen[int64(k)] = true
			case !errors.Is(err, sql.ErrNoRows):
				return nil, err
			}
		}
		return seen, nil
	}
	for chunk := range slices.Chunk(keys, visitedChunk) {
		q := "SELECT id FROM visited WHERE id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = int64(k)
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			seen[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// leaseQuery leases up to ?5 ready entries, oldest first: ?1 lease end,
// ?2 token, ?3 owner, ?4 now. An entry whose lease had expired gets the
// not-before time -1, so that RETURNING tells it from one that was not
// leased (its host's leased count already has it); every way out of a lease
// sets the not-before time again.
const leaseQuery = `UPDATE queue
	SET lease_until = ?1, lease_token = ?2, lease_owner = ?3, deliveries = deliveries + 1,
		not_before = CASE WHEN lease_until IS NULL THEN not_before ELSE -1 END
	WHERE seq IN (SELECT seq FROM queue
		WHERE not_before <= ?4 AND (lease_until IS NULL OR lease_until <= ?4)
		ORDER BY seq LIMIT ?5)
	RETURNING seq, data, deliveries, host_id, rank, not_before`

// nextEntryQuery finds the first moment after ?1 when an entry may become
// ready (a lease expiring, a not-before time passing), through the partial
// indexes of leased and delayed entries; NULL when none will.
const nextEntryQuery = `SELECT MIN(t) FROM (
	SELECT MIN(lease_until) AS t FROM queue WHERE lease_until > ?1
	UNION ALL SELECT MIN(not_before) FROM queue WHERE not_before > 0 AND not_before > ?1)`

// Lease hands out up to n ready entries, oldest first, for ttl. An entry is
// ready when its not-before time has passed and it is not leased, or its
// lease has expired (a crashed or slow consumer's entry is taken over). The
// entries are marked in one statement, so two Stores on one file never lease
// the same entry at once. It returns storage.ErrQueueEmpty when none is ready.
func (s *Store) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 || ttl <= 0 {
		return nil, fmt.Errorf("sqlitestore: lease(%d, %v): %w", n, ttl, ErrInvalidArgument)
	}
	now := time.Now()
	nowNs := now.UnixNano()
	token := rand.Int64()
	type leased = hostLeased
	var out []leased
	var next sql.NullInt64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out, next = out[:0], sql.NullInt64{}
		rows, err := tx.StmtContext(ctx, s.leaseReady).QueryContext(ctx,
			nowNs+ttl.Nanoseconds(), token, s.owner, nowNs, n)
		if err != nil {
			return err
		}
		defer rows.Close()
		var b hostBook
		for rows.Next() {
			var e storage.Entry
			var seq, rank, host, notBefore int64
			if err := rows.Scan(&seq, &e.Data, &e.Deliveries, &host, &rank, &notBefore); err != nil {
				return err
			}
			e.ID, e.Priority = leaseID(seq, token, host), int(-rank)
			out = append(out, leased{seq, host, e})
			if notBefore >= 0 { // not a lease taken over, counted already
				b.lease(host, notBefore == 0)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(out) > 0 {
			// Every candidate up to the last seq leased is leased now: the
			// heads move on from after it.
			b.leasedTo(slices.MaxFunc(out, func(a, b leased) int { return cmp.Compare(a.seq, b.seq) }).seq)
		}
		if err := s.flush(ctx, tx, &b); err != nil {
			return err
		}
		if err := s.nameHosts(ctx, tx, out); err != nil {
			return err
		}
		if len(out) < n {
			// The queue is drained of ready entries: find when the next one
			// becomes ready so that Notify can say so.
			return tx.QueryRowContext(ctx, nextEntryQuery, nowNs).Scan(&next)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("lease", err)
	}
	if next.Valid {
		s.wake.wakeAt(time.Unix(0, next.Int64))
	} else if len(out) > 0 {
		s.wake.wakeAt(now.Add(ttl))
	}
	if len(out) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	// RETURNING has no defined order; the contract is push order.
	slices.SortFunc(out, func(a, b leased) int { return cmp.Compare(a.seq, b.seq) })
	entries := make([]storage.Entry, len(out))
	for i, l := range out {
		entries[i] = l.e
	}
	return entries, nil
}

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
// lease is not held, in the order of ids. The IDs of one Lease are deleted
// a chunk at a time, trusting the host each ID names (IDs are this
// package's, and the token, random, is checked); a chunk that holds IDs of
// leases not held (unknown, or expired and swept back among the
// candidates) is undone and taken one ID at a time.
func (s *Store) ackIn(ctx context.Context, tx *sql.Tx, ids []string) ([]string, error) {
	type group struct {
		token       int64
		seqs, hosts []int64
		at          []int // indexes in ids
	}
	var groups []*group
	byToken := make(map[int64]*group)
	notHeld := make([]bool, len(ids))
	for i, id := range ids {
		seq, token, host, ok := parseLeaseID(id)
		if !ok {
			notHeld[i] = true
			continue
		}
		g := byToken[token]
		if g == nil {
			g = &group{token: token}
			byToken[token] = g
			groups = append(groups, g)
		}
		g.seqs, g.hosts, g.at = append(g.seqs, seq), append(g.hosts, host), append(g.at, i)
	}
	var b hostBook
	args := make([]any, 0, chunkSizes[0]+1)
	for _, g := range groups {
		err := eachChunk(len(g.seqs), func(start, size, i int) error {
			if size > 1 {
				args = args[:0]
				for _, seq := range g.seqs[start : start+size] {
					args = append(args, seq)
				}
				done, err := s.ackChunk(ctx, tx, i, append(args, g.token))
				if err != nil || done {
					for _, host := range g.hosts[start : start+size] {
						c := b.at(host)
						c.leased--
						c.removed = true
					}
					return err
				}
			}
			for j := start; j < start+size; j++ {
				held, err := s.ackOne(ctx, tx, &b, g.seqs[j], g.token, g.hosts[j])
				if err != nil {
					return err
				}
				notHeld[g.at[j]] = !held
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var unknown []string
	for i, id := range ids {
		if notHeld[i] {
			unknown = append(unknown, id)
		}
	}
	return unknown, s.flush(ctx, tx, &b)
}

// ackChunk deletes the held leases of a chunk (args: its seqs, the token)
// and reports whether every one was; if not, it undoes the chunk.
func (s *Store) ackChunk(ctx context.Context, tx *sql.Tx, i int, args []any) (bool, error) {
	if _, err := s.exec(ctx, tx, ackSavepoint); err != nil {
		return false, err
	}
	n, err := affected(s.exec(ctx, tx, ackChunks[i], args...))
	if err != nil {
		return false, err
	}
	if n < int64(chunkSizes[i]) {
		if _, err := s.exec(ctx, tx, ackRollback); err != nil {
			return false, err
		}
	}
	_, err = s.exec(ctx, tx, ackRelease)
	return n == int64(chunkSizes[i]), err
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
	ackLeased    = "DELETE FROM queue WHERE seq = ?1 AND lease_token = ?2 AND +host_id = ?3 AND lease_until IS NOT NULL"
	ackSwept     = "DELETE FROM queue WHERE seq = ?1 AND lease_token = ?2 AND +host_id = ?3"
	ackSavepoint = "SAVEPOINT ack"
	ackRollback  = "ROLLBACK TO ack"
	ackRelease   = "RELEASE ack"
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

// Len counts entries as of now: leased ones whose lease has expired count
// as ready again.
func (s *Store) Len(ctx context.Context) (storage.QueueLen, error) {
	if err := s.check(); err != nil {
		return storage.QueueLen{}, err
	}
	var l storage.QueueLen
	var total int
	err := s.db.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(lease_until > ?1), 0),
			COALESCE(SUM((lease_until IS NULL OR lease_until <= ?1) AND not_before > ?1), 0),
			COUNT(*)
		FROM queue`, time.Now().UnixNano()).Scan(&l.Leased, &l.Delayed, &total)
	if err != nil {
		return storage.QueueLen{}, s.wrap("len", err)
	}
	l.Ready = total - l.Leased - l.Delayed
	return l, nil
}

// Notify implements storage.QueueNotifier for events of this process: a
// Push or Release through this Store, and the moment a lease it knows of
// expires or a delayed entry becomes ready. Entries pushed by another
// process are not signalled.
func (s *Store) Notify() <-chan struct{} { return s.wake.ch }

// leaseID joins the entry's seq, the lease's random token (so that a lease
// that expired and was taken over cannot acknowledge the new holder's
// lease) and the entry's host ID (so that an Ack knows whose leased count
// it lowers without reading the row back; left out for the host "", 0).
func leaseID(seq, token, host int64) string {
	id := strconv.FormatInt(seq, 10) + ":" + strconv.FormatInt(token, 10)
	if host != 0 {
		id += ":" + strconv.FormatInt(host, 10)
	}
	return id
}

func parseLeaseID(id string) (seq, token, host int64, ok bool) {
	a, rest, found := strings.Cut(id, ":")
	if !found {
		return 0, 0, 0, false
	}
	b, c, hosted := strings.Cut(rest, ":")
	seq, err1 := strconv.ParseInt(a, 10, 64)
	token, err2 := strconv.ParseInt(b, 10, 64)
	var err3 error
	if hosted {
		host, err3 = strconv.ParseInt(c, 10, 64)
	}
	return seq, token, host, err1 == nil && err2 == nil && err3 == nil
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

// PushUnvisited implements storage.VisitedPusher: in one transaction it
// looks the keys up in the visited set and appends the entries whose keys
// are absent. With WithMaxSize it returns storage.ErrQueueFull, pushing
// nothing, when those do not all fit.
func (s *Store) PushUnvisited(ctx context.Context, keys []uint64, data [][]byte) ([]bool, error) {
	if len(keys) != len(data) {
		return nil, fmt.Errorf("sqlitestore: push unvisited: %w: %d keys, %d entries", storage.ErrLengthMismatch, len(keys), len(data))
	}
	return s.pushUnvisited(ctx, "push unvisited", keys, func(tx *sql.Tx, pushed []bool) error {
		todo := make([][]byte, 0, len(data))
		for i, d := range data {
			if pushed[i] {
				todo = append(todo, d)
			}
		}
		return s.insertPlain(ctx, tx, todo)
	})
}

// PushUnvisitedHosted is PushUnvisited for the host-aware queue: in one
// transaction it looks the keys up in the visited set and appends, each
// under its host and priority as PushHosted does, the entries whose keys
// are absent, and reports per entry whether it was pushed. A priority
// outside the int32 range is an error wrapping storage.ErrPriorityRange,
// and nothing is pushed. (storage.VisitedPusher has no hosted form yet; a
// queue run over a HostQueue needs one to keep a page's links one round
// trip.)
func (s *Store) PushUnvisitedHosted(ctx context.Context, keys []uint64, entries []storage.HostEntry) ([]bool, error) {
	if len(keys) != len(entries) {
		return nil, fmt.Errorf("sqlitestore: push unvisited hosted: %w: %d keys, %d entries", storage.ErrLengthMismatch, len(keys), len(entries))
	}
	if err := checkPriorities("push unvisited hosted", entries); err != nil {
		return nil, err
	}
	return s.pushUnvisited(ctx, "push unvisited hosted", keys, func(tx *sql.Tx, pushed []bool) error {
		todo := make([]storage.HostEntry, 0, len(entries))
		for i, e := range entries {
			if pushed[i] {
				todo = append(todo, e)
			}
		}
		return s.insertHosted(ctx, tx, todo)
	})
}

// pushUnvisited runs, in one transaction, the visited lookup of keys and
// insert with pushed[i] true for the keys not in the visited set, when
// there are some and they fit.
func (s *Store) pushUnvisited(ctx context.Context, op string, keys []uint64, insert func(tx *sql.Tx, pushed []bool) error) ([]bool, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	pushed := make([]bool, len(keys))
	if len(keys) == 0 {
		return pushed, nil
	}
	n := 0
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.purgeExpired(ctx, tx); err != nil {
			return err
		}
		seen, err := visitedAmong(ctx, tx, s.isVisited, keys)
		if err != nil {
			return err
		}
		n = 0
		for i, k := range keys {
			pushed[i] = !seen[int64(k)]
			if pushed[i] {
				n++
			}
		}
		if n == 0 {
			return nil
		}
		if err := s.checkRoom(ctx, tx, n); err != nil {
			return err
		}
		return insert(tx, pushed)
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if n > 0 {
		s.wake.signal()
	}
	return pushed, nil
}
