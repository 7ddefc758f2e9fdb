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
		ORDER BY seq LIMIT +?5)
	RETURNING seq, data, deliveries, host_id, rank, not_before`

// nextEntryQuery finds the first moment after ?1 when an entry may become
// ready (a lease expiring, a not-before time passing), through the partial
// indexes of leased and delayed entries; NULL when none will.
const nextEntryQuery = `SELECT MIN(t) FROM (
	SELECT MIN(lease_until) AS t FROM queue WHERE lease_until > ?1
	UNION ALL SELECT MIN(not_before) FROM queue WHERE not_before > 0 AND not_before > +?1)`

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
			return s.queryRow(ctx, tx, nextEntryQuery, nowNs).Scan(&next)
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
