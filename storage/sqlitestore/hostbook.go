package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The host-aware queue (storage.HostQueue). Each entry of queue has a host
// (the ID of its row in queue_hosts, 0 for the host "", so that an entry
// does not carry its host's name twice, in its row and in the index) and a
// rank, minus its priority, so that one ascending index (host_id, rank, seq)
// lists a host's entries in lease order. An entry is in one of three
// states, read from its columns:
//
//   - a candidate: not leased (lease_until NULL) and not delayed
//     (not_before 0), ready for LeaseHosts;
//   - delayed: not leased, not_before > 0 (a Release with a not-before
//     time); it becomes a candidate when a sweep finds its time passed;
//   - leased: lease_until set; when a sweep finds the lease expired it
//     becomes a candidate again, keeping its token, so that the holder can
//     still acknowledge or renew it until another consumer leases it.
//
// queue_hosts has a row per host with entries or with a ready time in the
// future: its ID and name, its ready time, its count of leased entries,
// and its head (the rank and seq of its first candidate). A host's row is
// deleted only when it has no entries, so no entry refers to an ID that
// was reused; the host "" keeps its row (a plain queue that empties and
// fills again would delete and create it every time). Every statement that moves entries between states reports
// what it did to a hostBook, which updates the hosts touched at the end of
// the transaction, with one statement of each kind for them all (per-row
// triggers cost more than the queue's own writes, and a statement per host
// made a broad crawl's transactions long). A host is parked while its
// ready time may be in the future; LeaseHosts walks the unparked hosts
// that have a head by (head_rank, head_seq), which is the contract's order
// across hosts, and takes from each its first candidates through the host
// index.
//
// The three changes that time makes (a lease expiring, a not-before time
// passing, a host's ready time coming) have no statement to report them:
// LeaseHosts and Head sweep them first, through partial indexes that hold
// only the leased entries, the delayed entries and the parked hosts, so a
// sweep costs what it changes, not what the queue holds. Plain Lease reads
// the times itself and needs no sweep: an expired lease it takes over is
// marked (leaseQuery) so that its host's count is not raised twice.
var migrateHostQueue = `ALTER TABLE queue ADD COLUMN host_id INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE queue ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX queue_host_rank ON queue (host_id, rank, seq);
	DROP INDEX queue_lease_owner;
	CREATE INDEX queue_leases ON queue (lease_until, lease_owner) WHERE lease_until IS NOT NULL;
	CREATE INDEX queue_delayed ON queue (not_before) WHERE not_before > 0;
	CREATE TABLE queue_hosts (
		id        INTEGER PRIMARY KEY,
		host      TEXT    NOT NULL UNIQUE,
		ready_at  INTEGER NOT NULL DEFAULT 0,
		parked    INTEGER NOT NULL DEFAULT 0,
		leased    INTEGER NOT NULL DEFAULT 0,
		head_rank INTEGER,
		head_seq  INTEGER
	);
	CREATE INDEX queue_hosts_order ON queue_hosts (parked, head_rank, head_seq) WHERE head_seq IS NOT NULL;
	CREATE INDEX queue_hosts_parked ON queue_hosts (ready_at) WHERE parked = 1;
	INSERT INTO queue_hosts (id, host, leased, head_rank, head_seq)
		SELECT 0, '', (SELECT COUNT(*) FROM queue WHERE lease_until IS NOT NULL), 0,
			(SELECT MIN(seq) FROM queue WHERE lease_until IS NULL AND not_before = 0)
		WHERE EXISTS (SELECT 1 FROM queue);
	UPDATE queue_hosts SET head_rank = NULL WHERE head_seq IS NULL;`

// candidatesFrom is a query of the rank and seq of up to limit candidates
// of host (an ID), in lease order from the position (rank, seq), included when op
// is ">=" and not when it is ">". It is two ranges of the host index, the
// rest of rank and the ranks after, because SQLite bounds an index range
// by a row value (rank, seq) on rank alone: seq is the rowid.
func candidatesFrom(host, rank, seq, op, limit string) string {
	r := strings.NewReplacer("{host}", host, "{rank}", rank, "{seq}", seq, "{op}", op, "{limit}", limit)
	return r.Replace(`SELECT * FROM (SELECT rank, seq FROM queue
			WHERE host_id = {host} AND rank = {rank} AND seq {op} {seq} AND lease_until IS NULL AND not_before = 0
			ORDER BY seq LIMIT {limit})
		UNION ALL SELECT * FROM (SELECT rank, seq FROM queue
			WHERE host_id = {host} AND rank > {rank} AND lease_until IS NULL AND not_before = 0
			ORDER BY rank, seq LIMIT {limit})
		LIMIT {limit}`)
}

// hostChange is what the statements of one transaction did to a host.
type hostChange struct {
	leased    int   // change in its count of leased entries
	lost      bool  // a candidate stopped being one: the head may move on
	gained    bool  // candidates appeared, the first at (rank, seq)
	rank, seq int64 // the first candidate gained
	removed   bool  // an entry was deleted: the host may have none left
	// No candidate is left before the seq from in the head's rank (0: none
	// known), so the new head is looked for from there.
	from int64
	// The candidates lost were the first ones, up to (toRank, toSeq) in
	// lease order: the new head is found after it, not by walking from the
	// old head past them.
	prefix        bool
	toRank, toSeq int64
}

// hostBook gathers the hostChanges of a transaction; flush applies them to
// queue_hosts, a few statements per host touched. The zero value is ready
// to use; a hostBook is used by one goroutine.
type hostBook struct {
	// The host last asked for, and its change: most transactions touch
	// one host, asked for once per entry.
	last    int64
	lastCh  *hostChange
	changes map[int64]*hostChange
}

// at returns the change of the host whose ID is host.
func (b *hostBook) at(host int64) *hostChange {
	if b.lastCh != nil && b.last == host {
		return b.lastCh
	}
	if b.changes == nil {
		b.changes = make(map[int64]*hostChange)
	}
	c := b.changes[host]
	if c == nil {
		c = &hostChange{}
		b.changes[host] = c
	}
	b.last, b.lastCh = host, c
	return c
}

// lease records that an entry of host was leased; wasCandidate tells
// whether it was one (rather than a delayed entry whose time had come).
func (b *hostBook) lease(host int64, wasCandidate bool) {
	c := b.at(host)
	c.leased++
	if wasCandidate {
		c.lose()
	}
}

// lose records that a candidate of the host stopped being one.
func (c *hostChange) lose() { c.lost, c.prefix, c.from = true, false, 0 }

// leasedTo records that the changes are Lease's, which leased every
// candidate up to seq: no host has one left at or before it.
func (b *hostBook) leasedTo(seq int64) {
	for _, c := range b.changes {
		c.from = seq + 1
	}
}

// leasePrefix records that the first k candidates of host, up to (rank,
// seq) in lease order, were leased, and nothing else happened to the host.
func (b *hostBook) leasePrefix(host int64, k int, rank, seq int64) {
	c := b.at(host)
	if *c != (hostChange{}) {
		c.leased += k
		c.lose()
		return
	}
	*c = hostChange{leased: k, lost: true, prefix: true, toRank: rank, toSeq: seq}
}

// gain records that the entry (rank, seq) of host became a candidate.
func (b *hostBook) gain(host, rank, seq int64) {
	c := b.at(host)
	if !c.gained || rank < c.rank || rank == c.rank && seq < c.seq {
		c.gained, c.rank, c.seq = true, rank, seq
	}
}

// Statements of flush, each for every host of a transaction at once: ?1 is
// a JSON array of an array per host, its ID first.
const (
	// flushHeads moves heads on, per host [ID, leased change, rank, seq]:
	// from the first candidate at or after (rank, seq) when rank is given
	// (the candidates before were leased), else from the stored head, or
	// from seq in its rank if later. No candidate comes before that but
	// those gained, which flushGains adds after. The first candidate of
	// the rank, s1, is one index step; the ranks after are a second range
	// (SQLite bounds a range by (rank, seq) on rank alone: seq is the
	// rowid).
	flushHeads = `WITH x AS MATERIALIZED (
		SELECT h.id AS id, j.value ->> 1 AS k, COALESCE(j.value ->> 2, h.head_rank) AS rank,
			(SELECT q.seq FROM queue q
				WHERE q.host_id = h.id AND q.rank = COALESCE(j.value ->> 2, h.head_rank)
					AND q.seq >= CASE WHEN j.value ->> 2 IS NULL THEN MAX(h.head_seq, j.value ->> 3) ELSE j.value ->> 3 END
					AND q.lease_until IS NULL AND q.not_before = 0
				ORDER BY q.seq LIMIT 1) AS s1
		FROM json_each(?1) j JOIN queue_hosts h ON h.id = j.value ->> 0)
	UPDATE queue_hosts SET leased = leased + x.k,
		head_rank = CASE WHEN x.s1 IS NOT NULL THEN x.rank ELSE (SELECT q.rank FROM queue q
			WHERE q.host_id = x.id AND q.rank > x.rank AND q.lease_until IS NULL AND q.not_before = 0
			ORDER BY q.rank, q.seq LIMIT 1) END,
		head_seq = COALESCE(x.s1, (SELECT q.seq FROM queue q
			WHERE q.host_id = x.id AND q.rank > x.rank AND q.lease_until IS NULL AND q.not_before = 0
			ORDER BY q.rank, q.seq LIMIT 1))
	FROM x WHERE queue_hosts.id = x.id`
	// flushLeased changes leased counts, per host [ID, change], and tells
	// which hosts may have no entry left (flushEmpty's test but the
	// queue's), so that an Ack's hosts still busy are not looked at again.
	flushLeased = `UPDATE queue_hosts SET leased = leased + (j.value ->> 1)
		FROM json_each(?1) j WHERE queue_hosts.id = j.value ->> 0
		RETURNING id, head_seq IS NULL AND leased = 0 AND parked = 0`
	// flushGains makes candidates heads where they come first, per host
	// [ID, rank, seq].
	flushGains = `UPDATE queue_hosts SET head_rank = j.value ->> 1, head_seq = j.value ->> 2
		FROM json_each(?1) j WHERE queue_hosts.id = j.value ->> 0
			AND (head_seq IS NULL OR (j.value ->> 1, j.value ->> 2) < (head_rank, head_seq))`
	// flushEmpty forgets the hosts, per host [ID], that have no entry left
	// and whose ready time has come (they are not parked).
	flushEmpty = `DELETE FROM queue_hosts WHERE id IN (SELECT j.value ->> 0 FROM json_each(?1) j)
		AND CASE WHEN head_seq IS NULL AND leased = 0 AND parked = 0
			THEN NOT EXISTS (SELECT 1 FROM queue WHERE host_id = queue_hosts.id) ELSE 0 END`
)

// Statements of flush for one host, the common case (a JSON array costs
// more than its parameters): ?1 is the host's ID.
const (
	// flushHead moves the head on: ?2 leased change, ?3 rank (NULL: the
	// stored head's), ?4 seq, as in flushHeads.
	flushHead = `UPDATE queue_hosts SET leased = leased + ?2, (head_rank, head_seq) = (
		SELECT * FROM (SELECT rank, seq FROM queue
			WHERE host_id = ?1 AND rank = COALESCE(?3, (SELECT head_rank FROM queue_hosts WHERE id = ?1))
				AND seq >= CASE WHEN ?3 IS NULL THEN MAX((SELECT head_seq FROM queue_hosts WHERE id = ?1), ?4) ELSE ?4 END
				AND lease_until IS NULL AND not_before = 0
			ORDER BY seq LIMIT 1)
		UNION ALL SELECT * FROM (SELECT rank, seq FROM queue
			WHERE host_id = ?1 AND rank > COALESCE(?3, (SELECT head_rank FROM queue_hosts WHERE id = ?1))
				AND lease_until IS NULL AND not_before = 0
			ORDER BY rank, seq LIMIT 1)
		LIMIT 1)
		WHERE id = ?1`
	flushLeasedOne = `UPDATE queue_hosts SET leased = leased + ?2 WHERE id = ?1`
	// flushLeasedEmpty is flushLeasedOne for a host that lost entries:
	// it tells whether the host may have none left (flushEmptyOne's test
	// but the queue's), so that a host still busy needs no second statement.
	flushLeasedEmpty = `UPDATE queue_hosts SET leased = leased + ?2 WHERE id = ?1
		RETURNING head_seq IS NULL AND leased = 0 AND parked = 0`
	flushGainOne = `UPDATE queue_hosts SET head_rank = ?2, head_seq = ?3
		WHERE id = ?1 AND (head_seq IS NULL OR (?2, ?3) < (head_rank, head_seq))`
	flushEmptyOne = `DELETE FROM queue_hosts WHERE id = ?1
		AND CASE WHEN head_seq IS NULL AND leased = 0 AND parked = 0
			THEN NOT EXISTS (SELECT 1 FROM queue WHERE host_id = ?1) ELSE 0 END`
)

// flushOne applies the change c of one host, with its own statements.
func (s *Store) flushOne(ctx context.Context, tx *sql.Tx, host int64, c *hostChange) error {
	var err error
	switch {
	case c.prefix:
		_, err = s.exec(ctx, tx, flushHead, host, c.leased, c.toRank, c.toSeq+1)
	case c.lost:
		_, err = s.exec(ctx, tx, flushHead, host, c.leased, nil, c.from)
	case c.leased != 0 && c.removed && !c.gained && host != 0:
		// An Ack's: the host is forgotten only if it may be empty.
		var empty bool
		err = s.queryRow(ctx, tx, flushLeasedEmpty, host, c.leased).Scan(&empty)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // no row, nothing to forget
		}
		if err == nil && empty {
			_, err = s.exec(ctx, tx, flushEmptyOne, host)
		}
		return err
	case c.leased != 0:
		_, err = s.exec(ctx, tx, flushLeasedOne, host, c.leased)
	}
	if err == nil && c.gained {
		_, err = s.exec(ctx, tx, flushGainOne, host, c.rank, c.seq)
	}
	if err == nil && c.removed && host != 0 {
		_, err = s.exec(ctx, tx, flushEmptyOne, host)
	}
	return err
}

// flush applies the changes of b to queue_hosts within tx, and empties b:
// for several hosts, at most one statement of each kind for them all.
func (s *Store) flush(ctx context.Context, tx *sql.Tx, b *hostBook) error {
	if len(b.changes) == 1 {
		err := s.flushOne(ctx, tx, b.last, b.lastCh)
		*b = hostBook{}
		return err
	}
	// Each a JSON array of rows under way, ",[…],[…]": the first ',' is
	// made its '['.
	var heads, leased, gains, empty []byte
	// checked: the hosts whose emptiness flushLeased tells (an Ack's).
	var checked map[int64]bool
	for host, c := range b.changes {
		switch {
		case c.prefix:
			heads = fmt.Appendf(heads, ",[%d,%d,%d,%d]", host, c.leased, c.toRank, c.toSeq+1)
		case c.lost:
			heads = fmt.Appendf(heads, ",[%d,%d,null,%d]", host, c.leased, c.from)
		case c.leased != 0:
			leased = fmt.Appendf(leased, ",[%d,%d]", host, c.leased)
			if c.removed && !c.gained && host != 0 {
				if checked == nil {
					checked = make(map[int64]bool)
				}
				checked[host] = true
				continue
			}
		}
		if c.gained {
			gains = fmt.Appendf(gains, ",[%d,%d,%d]", host, c.rank, c.seq)
		}
		if c.removed && host != 0 {
			empty = fmt.Appendf(empty, ",[%d]", host)
		}
	}
	*b = hostBook{}
	list := func(rows []byte) string {
		rows[0] = '['
		return string(append(rows, ']'))
	}
	if heads != nil {
		if _, err := s.exec(ctx, tx, flushHeads, list(heads)); err != nil {
			return err
		}
	}
	if leased != nil {
		err := s.eachRow(ctx, tx, flushLeased, []any{list(leased)}, func(rows *sql.Rows) error {
			var host int64
			var mayBeEmpty bool
			if err := rows.Scan(&host, &mayBeEmpty); err != nil {
				return err
			}
			if mayBeEmpty && checked[host] {
				empty = fmt.Appendf(empty, ",[%d]", host)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, f := range []struct {
		query string
		rows  []byte
	}{{flushGains, gains}, {flushEmpty, empty}} {
		if f.rows == nil {
			continue
		}
		if _, err := s.exec(ctx, tx, f.query, list(f.rows)); err != nil {
			return err
		}
	}
	return nil
}

// sweepLeases makes the entries whose lease expired at ?1 candidates. The
// token stays: the holder of an expired lease may still acknowledge or
// renew it until another consumer leases the entry.
const sweepLeases = `UPDATE queue SET lease_until = NULL, not_before = 0 WHERE lease_until <= ?1
	RETURNING host_id, rank, seq`

// sweepDelayed makes the entries whose not-before time passed at ?1
// candidates (or, leased, leaves them leased).
const sweepDelayed = `UPDATE queue SET not_before = 0 WHERE not_before > 0 AND not_before <= ?1
	RETURNING host_id, rank, seq, lease_until IS NULL`

// forgetHosts forgets the parked hosts whose ready time came at ?1 and that
// have no entries; unparkHosts unparks the others.
const (
	forgetHosts = `DELETE FROM queue_hosts WHERE parked = 1 AND ready_at <= ?1
		AND head_seq IS NULL AND leased = 0
		AND NOT EXISTS (SELECT 1 FROM queue WHERE host_id = queue_hosts.id)`
	unparkHosts = `UPDATE queue_hosts SET parked = 0 WHERE parked = 1 AND ready_at <= ?1`
)

// firstDue reads the first moment when time changes something: the
// earliest lease end, not-before time and parked host's ready time, each
// NULL when there is none, one step of its partial index each. A sweep has
// something to do when one has come; when none has, the earliest is also
// when the next entry may become ready, which a lease that ends short
// needs (nextReadyQuery) and so does not ask again.
const firstDue = `SELECT (SELECT MIN(lease_until) FROM queue WHERE lease_until IS NOT NULL),
	(SELECT MIN(not_before) FROM queue WHERE not_before > 0),
	(SELECT MIN(ready_at) FROM queue_hosts WHERE parked = 1)`

// sweepExpired applies the expiry of leases at now, and flushes.
func (s *Store) sweepExpired(ctx context.Context, tx *sql.Tx, now int64) error {
	var b hostBook
	err := s.eachRow(ctx, tx, sweepLeases, []any{now}, func(rows *sql.Rows) error {
		var host, rank, seq int64
		if err := rows.Scan(&host, &rank, &seq); err != nil {
			return err
		}
		c := b.at(host)
		c.leased--
		b.gain(host, rank, seq)
		return nil
	})
	if err != nil {
		return err
	}
	return s.flush(ctx, tx, &b)
}

// sweep applies, as of now, every change that time makes: expired leases
// and passed not-before times make their entries candidates, and hosts
// whose ready time has come are unparked (or forgotten, with no entries).
// When there was nothing to sweep, it returns the first moment after now
// when there will be (not valid: nothing waits); after a sweep, swept.
func (s *Store) sweep(ctx context.Context, tx *sql.Tx, now int64) (next sql.NullInt64, swept bool, err error) {
	// One statement when there is nothing to sweep, the common case.
	var times [3]sql.NullInt64
	if err := s.queryRow(ctx, tx, firstDue).Scan(&times[0], &times[1], &times[2]); err != nil {
		return next, false, err
	}
	var due [3]bool
	for i, t := range times {
		due[i] = t.Valid && t.Int64 <= now
		next = earliest(next, t)
	}
	if due == [3]bool{} {
		return next, false, nil
	}
	return sql.NullInt64{}, true, s.sweepDue(ctx, tx, now, due)
}

// earliest is the earlier of two times, either of which may be missing.
func earliest(a, b sql.NullInt64) sql.NullInt64 {
	if !a.Valid || b.Valid && b.Int64 < a.Int64 {
		return b
	}
	return a
}

// sweepDue is the work of sweep when something is due: due tells which of
// the leases ending, the not-before times and the hosts' ready times have
// come (a broad crawl's sweeps are of hosts' ready times alone).
func (s *Store) sweepDue(ctx context.Context, tx *sql.Tx, now int64, due [3]bool) error {
	if due[0] {
		if err := s.sweepExpired(ctx, tx, now); err != nil {
			return err
		}
	}
	if due[1] {
		if err := s.sweepDelayedAt(ctx, tx, now); err != nil {
			return err
		}
	}
	if !due[2] {
		return nil
	}
	for _, q := range []string{forgetHosts, unparkHosts} {
		if _, err := s.exec(ctx, tx, q, now); err != nil {
			return err
		}
	}
	return nil
}

// sweepDelayedAt makes the entries whose not-before time came at now
// candidates, and flushes.
func (s *Store) sweepDelayedAt(ctx context.Context, tx *sql.Tx, now int64) error {
	var b hostBook
	err := s.eachRow(ctx, tx, sweepDelayed, []any{now}, func(rows *sql.Rows) error {
		var host, rank, seq int64
		var free bool
		if err := rows.Scan(&host, &rank, &seq, &free); err != nil {
			return err
		}
		if free {
			b.gain(host, rank, seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.flush(ctx, tx, &b)
}

// exec runs the prepared statement of query within tx.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	s.stmts.Add(1)
	return tx.StmtContext(ctx, s.prepared[query]).ExecContext(ctx, args...)
}

// queryRow runs the prepared statement of query within tx, for one row.
func (s *Store) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	s.stmts.Add(1)
	return tx.StmtContext(ctx, s.prepared[query]).QueryRowContext(ctx, args...)
}

// eachRow runs the prepared statement of query within tx and calls f for
// each row; the rows are closed when it returns.
func (s *Store) eachRow(ctx context.Context, tx *sql.Tx, query string, args []any, f func(*sql.Rows) error) error {
	s.stmts.Add(1)
	rows, err := tx.StmtContext(ctx, s.prepared[query]).QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// preparedQueries are the statements of the queue that Open prepares into
// Store.prepared. A parameter whose value SQLite's planner reads (a LIMIT,
// one compared where a partial index's WHERE has a constant, as
// "not_before > ?" against "not_before > 0", or a "col = ?" that may be 0
// or 1) is written +?N: the planner does not look through the unary plus,
// and otherwise each execution with another value than the last parses and
// plans the statement again, which cost a lease as much as its own work
// (TestQueueStatementsNotReprepared).
var preparedQueries = slices.Concat([]string{flushHeads, flushLeased, flushGains, flushEmpty,
	flushHead, flushLeasedOne, flushLeasedEmpty, flushGainOne, flushEmptyOne,
	firstDue, sweepLeases, sweepDelayed, forgetHosts, unparkHosts,
	leaseHostQuery, nextHostsQuery, nextReadyQuery, nextEntryQuery,
	ackLeased, ackSwept,
	releaseHeld, releaseSwept, renewHeld, renewSwept, releaseOwnerQuery,
	pushedPlain, hostIDQuery, hostHeadQuery, hostIDsCreate, hostIDsRead, hostName, readyLater, readyPast, readyLaterMany, readyPastMany, leaseHeads},
	insertPlainChunks, insertHostedChunks, ackChunks)
