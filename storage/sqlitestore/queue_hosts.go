package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// hostIDQuery returns the ID of host ?1, creating its row if it has none.
// The host "" is always 0 (a conflict on the ID is then one on the host).
const hostIDQuery = `INSERT INTO queue_hosts (id, host) VALUES (CASE WHEN ?1 = '' THEN 0 END, ?1)
	ON CONFLICT DO UPDATE SET host = ?1 RETURNING id`

// hostHeadQuery reads the ID and head of host ?1, without writing: a push
// to a known host, the common case, leaves its row as it is unless the
// entry comes before its head.
const hostHeadQuery = "SELECT id, head_rank, head_seq FROM queue_hosts WHERE host = ?1"

// The same for the hosts of the JSON array ?1 of names: hostIDsCreate
// creates the rows missing, hostIDsRead reads the IDs, names and heads.
const (
	hostIDsCreate = `INSERT INTO queue_hosts (id, host)
		SELECT CASE WHEN value = '' THEN 0 END, value FROM json_each(?1) WHERE true ON CONFLICT DO NOTHING`
	hostIDsRead = "SELECT id, host, head_rank, head_seq FROM queue_hosts WHERE host IN (SELECT value FROM json_each(?1))"
)

// hostHead is a host's ID and head (its first candidate, if it has one)
// as a push reads them.
type hostHead struct {
	id        int64
	rank, seq sql.NullInt64
}

// precedes tells whether the entry (rank, seq) comes before the head, so
// that pushing it makes it the head.
func (h hostHead) precedes(rank, seq int64) bool {
	return !h.seq.Valid || rank < h.rank.Int64 || rank == h.rank.Int64 && seq < h.seq.Int64
}

// hostIDs returns the IDs and heads of the entries' hosts, creating the
// rows missing: one read for hosts known, and a write and a second read
// for the others.
func (s *Store) hostIDs(ctx context.Context, tx *sql.Tx, entries []storage.HostEntry) (map[string]hostHead, error) {
	ids := make(map[string]hostHead)
	var names []string
	for _, e := range entries {
		if _, ok := ids[e.Host]; !ok {
			ids[e.Host] = hostHead{id: -1}
			names = append(names, e.Host)
		}
	}
	if len(names) == 1 {
		h := hostHead{}
		err := s.queryRow(ctx, tx, hostHeadQuery, names[0]).Scan(&h.id, &h.rank, &h.seq)
		if errors.Is(err, sql.ErrNoRows) {
			h = hostHead{}
			err = s.queryRow(ctx, tx, hostIDQuery, names[0]).Scan(&h.id)
		}
		ids[names[0]] = h
		return ids, err
	}
	read := func(names []string) (missing []string, err error) {
		list, err := json.Marshal(names)
		if err != nil {
			return nil, err
		}
		err = s.eachRow(ctx, tx, hostIDsRead, []any{string(list)}, func(rows *sql.Rows) error {
			var h hostHead
			var name string
			if err := rows.Scan(&h.id, &name, &h.rank, &h.seq); err != nil {
				return err
			}
			ids[name] = h
			return nil
		})
		for _, name := range names {
			if ids[name].id < 0 {
				missing = append(missing, name)
			}
		}
		return missing, err
	}
	missing, err := read(names)
	if err != nil || len(missing) == 0 {
		return ids, err
	}
	list, err := json.Marshal(missing)
	if err != nil {
		return nil, err
	}
	if _, err := s.exec(ctx, tx, hostIDsCreate, string(list)); err != nil {
		return nil, err
	}
	if missing, err = read(missing); err == nil && len(missing) > 0 {
		err = fmt.Errorf("sqlitestore: hosts %q have no row after their creation", missing)
	}
	return ids, err
}

// hostName returns the name of the host whose ID is ?1.
const hostName = "SELECT host FROM queue_hosts WHERE id = ?1"

// leaseHostQuery leases up to ?7 candidates of host ID ?4 from its head (rank
// ?5, seq ?6) on: ?1 lease end, ?2 token, ?3 owner.
var leaseHostQuery = `UPDATE queue
	SET lease_until = ?1, lease_token = ?2, lease_owner = ?3, deliveries = deliveries + 1
	WHERE seq IN (SELECT seq FROM (` + candidatesFrom("?4", "?5", "?6", ">=", "+?7") + `))
	RETURNING seq, data, deliveries, rank`

// nextHostsQuery lists up to ?4 hosts with candidates, unparked (?1 = 0) or
// parked (1), in lease order after the head (rank ?2, seq ?3), that hold
// fewer than ?5 leased entries (the host "" any number). The hosts full
// are passed over in SQLite's loop: in a broad crawl most hosts whose
// ready time came hold their share already, and reading them a page at a
// time made a lease read the hosts table in a score of pages.
const nextHostsQuery = `SELECT id, host, ready_at, leased, head_rank, head_seq FROM queue_hosts
	WHERE parked = +?1 AND head_seq IS NOT NULL AND (head_rank, head_seq) > (?2, ?3)
		AND (leased < +?5 OR id = 0)
	ORDER BY head_rank, head_seq LIMIT +?4`

// nextReadyQuery finds the first moment after ?1 when something may become
// ready: a lease expiring, a not-before time passing, a host's ready time
// coming; NULL when nothing waits.
const nextReadyQuery = `SELECT MIN(t) FROM (
	SELECT MIN(lease_until) AS t FROM queue WHERE lease_until > ?1
	UNION ALL SELECT MIN(not_before) FROM queue WHERE not_before > 0 AND not_before > +?1
	UNION ALL SELECT MIN(ready_at) FROM queue_hosts WHERE parked = 1)`

// hostRow is a row of queue_hosts as nextHostsQuery reads it.
type hostRow struct {
	id                int64
	host              string
	readyAt, leased   int64
	headRank, headSeq int64
}

// hostLeased is an entry that Lease leased, with its seq and host ID.
type hostLeased struct {
	seq, host int64
	e         storage.Entry
}

// nameHosts sets the Host of the entries of out, by their host IDs, one
// query per host other than "".
func (s *Store) nameHosts(ctx context.Context, tx *sql.Tx, out []hostLeased) error {
	var names map[int64]string
	for i := range out {
		id := out[i].host
		if id == 0 {
			continue
		}
		name, ok := names[id]
		if !ok {
			if err := s.queryRow(ctx, tx, hostName, id).Scan(&name); err != nil {
				return err
			}
			if names == nil {
				names = make(map[int64]string)
			}
			names[id] = name
		}
		out[i].e.Host = name
	}
	return nil
}

// unixNano is t in Unix nanoseconds, clamped to what an int64 holds (the
// zero time is before any time stored).
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// PushHosted implements storage.HostQueue: entries are appended in one
// transaction, all or none, each under its host and priority. With
// WithMaxSize it returns storage.ErrQueueFull when they do not all fit; a
// priority outside the int32 range is an error wrapping
// storage.ErrPriorityRange, and nothing is pushed.
func (s *Store) PushHosted(ctx context.Context, entries ...storage.HostEntry) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := checkPriorities("push hosted", entries); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.checkRoom(ctx, tx, len(entries)); err != nil {
			return err
		}
		return s.insertHosted(ctx, tx, entries)
	})
	if err != nil {
		return s.wrap("push hosted", err)
	}
	s.wake.signal()
	return nil
}

// checkPriorities returns an error wrapping storage.ErrPriorityRange for
// the first entry whose priority does not fit in an int32.
func checkPriorities(op string, entries []storage.HostEntry) error {
	for i, e := range entries {
		if err := storage.CheckPriority(e.Priority); err != nil {
			return fmt.Errorf("sqlitestore: %s: entry %d (host %q, priority %d): %w", op, i, e.Host, e.Priority, err)
		}
	}
	return nil
}

// insertHosted appends entries within tx, each under its host (whose row
// it creates if need be) and priority, and makes them their hosts' heads
// where they come first.
func (s *Store) insertHosted(ctx context.Context, tx *sql.Tx, entries []storage.HostEntry) error {
	ids, err := s.hostIDs(ctx, tx, entries)
	if err != nil {
		return err
	}
	hostIDs := make([]int64, len(entries))
	for j, e := range entries {
		hostIDs[j] = ids[e.Host].id
	}
	var b hostBook
	args := make([]any, 0, 3*chunkSizes[0])
	err = eachChunk(len(entries), func(start, size, i int) error {
		args = args[:0]
		for j, e := range entries[start : start+size] {
			d := e.Data
			if d == nil {
				d = []byte{} // the column is NOT NULL; nil and empty mean the same payload
			}
			args = append(args, d, hostIDs[start+j], -int64(e.Priority))
		}
		last, err := lastID(s.exec(ctx, tx, insertHostedChunks[i], args...))
		if err != nil {
			return err
		}
		// The rows of one INSERT take consecutive seqs (AUTOINCREMENT, one
		// writer).
		for j, e := range entries[start : start+size] {
			// An entry after its host's head (every entry but those of a
			// new host or of a higher priority) changes nothing there.
			if rank, seq := -int64(e.Priority), last-int64(size-1-j); ids[e.Host].precedes(rank, seq) {
				b.gain(hostIDs[start+j], rank, seq)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.flush(ctx, tx, &b)
}

// lastID is the rowid a statement's result reports.
func lastID(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// checkRoom returns storage.ErrQueueFull when n more entries would take the
// queue past WithMaxSize.
func (s *Store) checkRoom(ctx context.Context, tx *sql.Tx, n int) error {
	if s.cfg.maxSize <= 0 {
		return nil
	}
	var total int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM queue").Scan(&total); err != nil {
		return err
	}
	if total+n > s.cfg.maxSize {
		return storage.ErrQueueFull
	}
	return nil
}

// LeaseHosts implements storage.HostQueue in one transaction. now is the
// time of the whole call: hosts' ready times, entries' not-before times and
// leases' expiry are read against it, and the leases it grants run ttl
// from it. Hosts are taken in the order of their first candidate (highest
// priority, then oldest), each giving its first candidates up to perHost
// minus its leased entries (perHost <= 0: no limit). The cost is O(log n)
// per entry handed out, plus one index step per ready host that is full.
func (s *Store) LeaseHosts(ctx context.Context, now time.Time, n, perHost int, ttl time.Duration) ([]storage.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 || ttl <= 0 {
		return nil, fmt.Errorf("sqlitestore: lease hosts(%d, %v): %w", n, ttl, ErrInvalidArgument)
	}
	nowNs := unixNano(now)
	until := nowNs + ttl.Nanoseconds()
	if until < nowNs {
		until = math.MaxInt64
	}
	token := rand.Int64()
	var out []storage.Entry
	var next sql.NullInt64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out, next = out[:0], sql.NullInt64{}
		due, swept, err := s.sweep(ctx, tx, nowNs)
		if err != nil {
			return err
		}
		var b hostBook
		var reparked bool
		if out, reparked, err = s.leaseHosts(ctx, tx, &b, nowNs, n, perHost, until, token); err != nil {
			return err
		}
		if err := s.flush(ctx, tx, &b); err != nil {
			return err
		}
		if len(out) == n {
			return nil
		}
		if !swept && !reparked {
			// What waited before this call still does, and the leases
			// it granted end at until: no need to read it again.
			if next = due; len(out) > 0 {
				next = earliest(next, sql.NullInt64{Int64: until, Valid: true})
			}
			return nil
		}
		return s.queryRow(ctx, tx, nextReadyQuery, nowNs).Scan(&next)
	})
	if err != nil {
		return nil, s.wrap("lease hosts", err)
	}
	if next.Valid {
		s.wake.wakeAt(time.Unix(0, next.Int64))
	} else if len(out) > 0 {
		s.wake.wakeAt(time.Unix(0, until))
	}
	if len(out) == 0 {
		return nil, storage.ErrQueueEmpty
	}
	return out, nil
}

// leaseHosts walks the unparked hosts in lease order and leases from each
// its share, until n are leased or no host is left. Leasing moves a host's
// head on in the index only at the flush, after the walk: the walk meets
// each host once.
func (s *Store) leaseHosts(ctx context.Context, tx *sql.Tx, b *hostBook, now int64, n, perHost int, until, token int64) (out []storage.Entry, reparked bool, err error) {
	after := hostRow{headRank: math.MinInt64, headSeq: math.MinInt64}
	for more := true; more && len(out) < n; {
		limit := min(max(n-len(out), 16), 256)
		hosts, err := s.readHosts(ctx, tx, 0, after, limit, perHost)
		if err != nil || len(hosts) == 0 {
			return out, reparked, err
		}
		// A page short of its limit is the last: once each of its hosts
		// is asked, no need to read again.
		more = len(hosts) == limit
		var shares []hostShare
		want := n - len(out)
		for _, h := range hosts {
			if want == 0 {
				// A host may give less than its quota: the next page
				// starts after the last host asked.
				more = true
				break
			}
			after = h
			if h.readyAt > now {
				// Unparked by a sweep at a later now than this call's
				// (another consumer's clock): park it again.
				if _, err := tx.ExecContext(ctx, "UPDATE queue_hosts SET parked = 1 WHERE id = ?", h.id); err != nil {
					return out, reparked, err
				}
				reparked = true
				continue
			}
			quota := want
			if perHost > 0 && h.id != 0 { // the host "" has no limit
				quota = min(quota, perHost-int(h.leased))
			}
			if quota > 0 {
				shares = append(shares, hostShare{h: h, quota: quota})
				want -= quota
			}
		}
		if out, err = s.leaseShares(ctx, tx, b, shares, until, token, out); err != nil {
			return out, reparked, err
		}
	}
	return out, reparked, nil
}

// hostShare is what LeaseHosts takes from a host: up to quota entries.
type hostShare struct {
	h       hostRow
	quota   int
	entries []storage.Entry
}

// leaseShares leases the shares and appends their entries to out, host
// after host. The shares of one or two entries (perHost 1 or 2, a broad
// crawl's) are their hosts' heads and the candidates after: they are
// leased together, in one statement (a statement per host made a lease of
// a broad crawl a score of them).
func (s *Store) leaseShares(ctx context.Context, tx *sql.Tx, b *hostBook, shares []hostShare, until, token int64, out []storage.Entry) ([]storage.Entry, error) {
	var heads []byte
	at := make(map[int64]int) // host ID → its share, for the heads
	for i := range shares {
		if sh := &shares[i]; sh.quota <= 2 {
			heads = fmt.Appendf(heads, ",[%d,%d,%d,%d]", sh.h.id, sh.h.headRank, sh.h.headSeq, sh.quota)
			at[sh.h.id] = i
		}
	}
	if len(at) > 1 {
		heads[0] = '['
		err := s.eachRow(ctx, tx, leaseHeads, []any{until, token, s.owner, string(append(heads, ']'))}, func(rows *sql.Rows) error {
			var e storage.Entry
			var seq, rank, host int64
			if err := rows.Scan(&seq, &e.Data, &e.Deliveries, &rank, &host); err != nil {
				return err
			}
			sh := &shares[at[host]]
			e.ID, e.Host, e.Priority = leaseID(seq, token, host), sh.h.host, int(-rank)
			sh.entries = append(sh.entries, e)
			return nil
		})
		if err != nil {
			return out, err
		}
		for _, i := range at {
			sh := &shares[i]
			if len(sh.entries) == 0 {
				continue
			}
			// RETURNING has no defined order; a host's entries go in
			// lease order. Its head among them, they are its first
			// candidates.
			slices.SortFunc(sh.entries, func(a, b storage.Entry) int {
				return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(entrySeq(a), entrySeq(b)))
			})
			first, last := sh.entries[0], sh.entries[len(sh.entries)-1]
			if entrySeq(first) == sh.h.headSeq {
				b.leasePrefix(sh.h.id, len(sh.entries), int64(-last.Priority), entrySeq(last))
			} else {
				c := b.at(sh.h.id)
				c.leased += len(sh.entries)
				c.lose()
			}
		}
	}
	for i := range shares {
		sh := &shares[i]
		if sh.quota > 2 || len(at) == 1 {
			var err error
			if sh.entries, err = s.leaseFrom(ctx, tx, b, sh.h, sh.quota, until, token); err != nil {
				return out, err
			}
		}
		if sh.h.readyAt > 0 && sh.h.id != 0 {
			for j := range sh.entries {
				sh.entries[j].HostReady = time.Unix(0, sh.h.readyAt)
			}
		}
		out = append(out, sh.entries...)
	}
	return out, nil
}

// entrySeq is the seq of an entry this Store leased, from its ID.
func entrySeq(e storage.Entry) int64 {
	seq, _, _, _ := parseLeaseID(e.ID)
	return seq
}

// leaseHeads leases, per host of the JSON array ?4 of [ID, head rank, head
// seq, quota], its head (a candidate) and, when its quota is 2, the
// candidate after (two ranges of the host index, as candidatesFrom): ?1
// lease end, ?2 token, ?3 owner.
const leaseHeads = `WITH h AS MATERIALIZED (
		SELECT value ->> 0 AS id, value ->> 1 AS rank, value ->> 2 AS seq, value ->> 3 AS quota FROM json_each(?4))
	UPDATE queue
	SET lease_until = ?1, lease_token = ?2, lease_owner = ?3, deliveries = deliveries + 1
	WHERE seq IN (SELECT seq FROM h
		UNION ALL SELECT COALESCE(
			(SELECT q.seq FROM queue q WHERE q.host_id = h.id AND q.rank = h.rank AND q.seq > h.seq
				AND q.lease_until IS NULL AND q.not_before = 0 ORDER BY q.seq LIMIT 1),
			(SELECT q.seq FROM queue q WHERE q.host_id = h.id AND q.rank > h.rank
				AND q.lease_until IS NULL AND q.not_before = 0 ORDER BY q.rank, q.seq LIMIT 1))
		FROM h WHERE h.quota > 1)
		AND lease_until IS NULL AND not_before = 0
	RETURNING seq, data, deliveries, rank, host_id`

// readHosts reads up to limit hosts with candidates, parked or not, in
// lease order after the head of after, that hold fewer than perHost leased
// entries (perHost <= 0: any number; the host "" always).
func (s *Store) readHosts(ctx context.Context, tx *sql.Tx, parked int, after hostRow, limit, perHost int) ([]hostRow, error) {
	if perHost <= 0 {
		perHost = math.MaxInt64
	}
	var hosts []hostRow
	err := s.eachRow(ctx, tx, nextHostsQuery, []any{parked, after.headRank, after.headSeq, limit, perHost}, func(rows *sql.Rows) error {
		var h hostRow
		if err := rows.Scan(&h.id, &h.host, &h.readyAt, &h.leased, &h.headRank, &h.headSeq); err != nil {
			return err
		}
		hosts = append(hosts, h)
		return nil
	})
	return hosts, err
}

// leaseFrom leases up to quota candidates of h, from its head on, and
// returns them in lease order.
func (s *Store) leaseFrom(ctx context.Context, tx *sql.Tx, b *hostBook, h hostRow, quota int, until, token int64) ([]storage.Entry, error) {
	type leased struct {
		rank, seq int64
		e         storage.Entry
	}
	var got []leased
	err := s.eachRow(ctx, tx, leaseHostQuery, []any{until, token, s.owner, h.id, h.headRank, h.headSeq, quota}, func(rows *sql.Rows) error {
		var l leased
		if err := rows.Scan(&l.seq, &l.e.Data, &l.e.Deliveries, &l.rank); err != nil {
			return err
		}
		l.e.ID, l.e.Host, l.e.Priority = leaseID(l.seq, token, h.id), h.host, int(-l.rank)
		got = append(got, l)
		return nil
	})
	if err != nil || len(got) == 0 {
		return nil, err
	}
	// RETURNING has no defined order.
	slices.SortFunc(got, func(a, b leased) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq))
	})
	last := got[len(got)-1]
	b.leasePrefix(h.id, len(got), last.rank, last.seq)
	out := make([]storage.Entry, len(got))
	for i, l := range got {
		out[i] = l.e
	}
	return out, nil
}
