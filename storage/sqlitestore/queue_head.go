package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// Hosts' ready times (SetHostReady) and the view of what waits (Head).

// SetHostReady implements storage.HostQueue in one transaction: each host's
// ready time becomes the later of the stored one and the given one. A time
// already past for a host the Store does not know is not stored (the host
// has nothing to hold back).
func (s *Store) SetHostReady(ctx context.Context, ready map[string]time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, ok := ready[""]; ok {
		// Entries pushed without a host have no ready time.
		ready = maps.Clone(ready)
		delete(ready, "")
	}
	if len(ready) == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if len(ready) == 1 {
			for host, t := range ready {
				at, q := unixNano(t), readyLater
				if at <= now {
					q = readyPast
				}
				_, err := s.exec(ctx, tx, q, host, at)
				return err
			}
		}
		// Several hosts: one statement for the times to come, one for
		// those past, each over a JSON array of [host, time].
		var later, past [][2]any
		for host, t := range ready {
			if at := unixNano(t); at > now {
				later = append(later, [2]any{host, at})
			} else {
				past = append(past, [2]any{host, at})
			}
		}
		for _, f := range []struct {
			query string
			rows  [][2]any
		}{{readyLaterMany, later}, {readyPastMany, past}} {
			if len(f.rows) == 0 {
				continue
			}
			rows, err := json.Marshal(f.rows)
			if err != nil {
				return err
			}
			if _, err := s.exec(ctx, tx, f.query, string(rows)); err != nil {
				return err
			}
		}
		return nil
	})
	return s.wrap("set host ready", err)
}

// Statements of SetHostReady: ?1 host, ?2 ready time. A time to come
// creates the host's row if need be; a time past only moves a known host's
// on.
const (
	readyLater = `INSERT INTO queue_hosts (id, host, ready_at, parked)
		VALUES (CASE WHEN ?1 = '' THEN 0 END, ?1, ?2, 1)
		ON CONFLICT DO UPDATE SET ready_at = ?2, parked = 1 WHERE ready_at < ?2`
	readyPast = "UPDATE queue_hosts SET ready_at = ?2, parked = 1 WHERE host = ?1 AND ready_at < ?2"
	// The same for the hosts of the JSON array ?1 of [host, time].
	readyLaterMany = `INSERT INTO queue_hosts (id, host, ready_at, parked)
		SELECT CASE WHEN j.value ->> 0 = '' THEN 0 END, j.value ->> 0, j.value ->> 1, 1 FROM json_each(?1) j WHERE true
		ON CONFLICT DO UPDATE SET ready_at = excluded.ready_at, parked = 1 WHERE ready_at < excluded.ready_at`
	readyPastMany = `UPDATE queue_hosts SET ready_at = j.value ->> 1, parked = 1
		FROM json_each(?1) j WHERE queue_hosts.host = j.value ->> 0 AND ready_at < j.value ->> 1`
)

// Head implements storage.HostQueue: up to n pending entries, hosts in the
// order LeaseHosts takes them (ready or not, full or not), each host's
// candidates and delayed entries in rank order. It sweeps first, as
// LeaseHosts does, so it is a write transaction.
func (s *Store) Head(ctx context.Context, n int) ([]storage.HeadEntry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, nil
	}
	var out []storage.HeadEntry
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		if _, _, err := s.sweep(ctx, tx, time.Now().UnixNano()); err != nil {
			return err
		}
		start := hostRow{headRank: math.MinInt64, headSeq: math.MinInt64}
		// Both lists are in lease order; n hosts of each are enough, as
		// every host listed gives at least one entry.
		ready, err := s.readHosts(ctx, tx, 0, start, n, 0)
		if err != nil {
			return err
		}
		parked, err := s.readHosts(ctx, tx, 1, start, n, 0)
		if err != nil {
			return err
		}
		hosts := append(ready, parked...)
		slices.SortFunc(hosts, func(a, b hostRow) int {
			return cmp.Or(cmp.Compare(a.headRank, b.headRank), cmp.Compare(a.headSeq, b.headSeq))
		})
		listed := make(map[string]bool, len(hosts))
		for _, h := range hosts {
			if len(out) == n {
				return nil
			}
			listed[h.host] = true
			if out, err = headOf(ctx, tx, h, n-len(out), out); err != nil {
				return err
			}
		}
		// Every host with a candidate is listed; the hosts whose entries
		// all wait for their not-before time come last.
		out, err = delayedOnly(ctx, tx, listed, n-len(out), out)
		return err
	})
	if err != nil {
		return nil, s.wrap("head", err)
	}
	return out, nil
}

// delayedOnly appends up to limit delayed entries of hosts not in listed to
// out: hosts by their first not-before time, each host's entries in rank
// order.
func delayedOnly(ctx context.Context, tx *sql.Tx, listed map[string]bool, limit int, out []storage.HeadEntry) ([]storage.HeadEntry, error) {
	if limit <= 0 {
		return out, nil
	}
	type delayed struct {
		rank, seq int64
		e         storage.HeadEntry
	}
	var hosts []string
	byHost := make(map[string][]delayed)
	rows, err := tx.QueryContext(ctx, `SELECT h.host, q.rank, q.seq, q.data, q.not_before, h.ready_at
		FROM queue q JOIN queue_hosts h ON h.id = q.host_id
		WHERE q.not_before > 0 AND q.lease_until IS NULL ORDER BY q.not_before`)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for n := 0; n < limit && rows.Next(); {
		var d delayed
		var notBefore, readyAt int64
		if err := rows.Scan(&d.e.Host, &d.rank, &d.seq, &d.e.Data, &notBefore, &readyAt); err != nil {
			return out, err
		}
		if listed[d.e.Host] {
			continue
		}
		d.e.Priority, d.e.NotBefore = int(-d.rank), time.Unix(0, notBefore)
		if readyAt > 0 {
			d.e.HostReady = time.Unix(0, readyAt)
		}
		if byHost[d.e.Host] == nil {
			hosts = append(hosts, d.e.Host)
		}
		byHost[d.e.Host] = append(byHost[d.e.Host], d)
		n++
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	for _, h := range hosts {
		ds := byHost[h]
		slices.SortFunc(ds, func(a, b delayed) int {
			return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq))
		})
		for _, d := range ds {
			out = append(out, d.e)
		}
	}
	return out, nil
}

// headOf appends up to limit pending entries of h, in rank order, to out.
func headOf(ctx context.Context, tx *sql.Tx, h hostRow, limit int, out []storage.HeadEntry) ([]storage.HeadEntry, error) {
	rows, err := tx.QueryContext(ctx, `SELECT rank, data, not_before FROM queue
		WHERE host_id = ? AND lease_until IS NULL ORDER BY rank, seq LIMIT ?`, h.id, limit)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var rank, notBefore int64
		e := storage.HeadEntry{Host: h.host}
		if err := rows.Scan(&rank, &e.Data, &notBefore); err != nil {
			return out, err
		}
		e.Priority = int(-rank)
		if notBefore > 0 {
			e.NotBefore = time.Unix(0, notBefore)
		}
		if h.readyAt > 0 {
			e.HostReady = time.Unix(0, h.readyAt)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
