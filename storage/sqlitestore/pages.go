package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"math"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// duePageBatch is how many due pages one query of DuePages reads; the rows
// are closed before they are yielded, so the loop may use the Store.
const duePageBatch = 512

// GetPages implements storage.PageStore, in one query per chunk of IDs.
func (s *Store) GetPages(ctx context.Context, ids ...uint64) ([]storage.PageState, []bool, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	states, found := make([]storage.PageState, len(ids)), make([]bool, len(ids))
	at := make(map[int64][]int, len(ids))
	for i, id := range ids {
		at[int64(id)] = append(at[int64(id)], i)
	}
	for start := 0; start < len(ids); start += visitedChunk {
		chunk := ids[start:min(start+visitedChunk, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = int64(id)
		}
		q := "SELECT id, data FROM pages WHERE id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, nil, s.wrap("get pages", err)
		}
		for rows.Next() {
			var id int64
			var data []byte
			if err := rows.Scan(&id, &data); err != nil {
				rows.Close()
				return nil, nil, s.wrap("get pages", err)
			}
			for _, i := range at[id] {
				if err := states[i].UnmarshalBinary(data); err != nil {
					rows.Close()
					return nil, nil, fmt.Errorf("sqlitestore: page %d: %w", uint64(id), err)
				}
				found[i] = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, s.wrap("get pages", err)
		}
	}
	return states, found, nil
}

// PutPages implements storage.PageStore in one transaction, so a batch is
// stored whole or not at all.
func (s *Store) PutPages(ctx context.Context, pages ...storage.Page) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(pages) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error { return putPagesIn(ctx, tx, pages) })
	return s.wrap("put pages", err)
}

// putPagesIn stores pages within tx.
func putPagesIn(ctx context.Context, tx *sql.Tx, pages []storage.Page) error {
	if len(pages) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx,
		"INSERT INTO pages (id, due, data) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET due = excluded.due, data = excluded.data")
	if err != nil {
		return err
	}
	defer stmt.Close()
	var buf []byte
	for _, p := range pages {
		buf, _ = p.State.AppendBinary(buf[:0]) // never fails: the error is encoding.BinaryAppender's
		if _, err := stmt.ExecContext(ctx, int64(p.ID), p.State.DueMillis(), buf); err != nil {
			return err
		}
	}
	return nil
}

var _ storage.PageAcker = (*Store)(nil)

// AckPages implements storage.PageAcker: the entries are acknowledged and
// the states of those acknowledged are stored in one transaction, so a
// crash leaves both or neither.
func (s *Store) AckPages(ctx context.Context, ids []string, pages []storage.LeasePage) error {
	if err := s.check(); err != nil {
		return err
	}
	var unknown []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if unknown, err = s.ackIn(ctx, tx, ids); err != nil {
			return err
		}
		return putPagesIn(ctx, tx, ackedPages(ids, unknown, pages))
	})
	return s.ackResult(unknown, err)
}

// ackedPages returns the pages whose lease is in ids and not in unknown.
func ackedPages(ids, unknown []string, pages []storage.LeasePage) []storage.Page {
	acked := make(map[string]bool, len(ids))
	for _, id := range ids {
		acked[id] = true
	}
	for _, id := range unknown {
		delete(acked, id)
	}
	out := make([]storage.Page, 0, len(pages))
	for _, p := range pages {
		if acked[p.Lease] {
			out = append(out, p.Page)
		}
	}
	return out
}

// DuePages implements storage.PageStore: it reads the due pages in batches
// in the order of their IDs, each batch one query.
func (s *Store) DuePages(ctx context.Context, before time.Time) iter.Seq2[storage.Page, error] {
	return func(yield func(storage.Page, error) bool) {
		cutoff := before.UnixMilli()
		cursor, first := int64(math.MinInt64), true
		for {
			batch, err := s.duePageBatch(ctx, cutoff, cursor, first)
			if err != nil {
				yield(storage.Page{}, err)
				return
			}
			for _, p := range batch {
				if !yield(p, nil) {
					return
				}
			}
			if len(batch) < duePageBatch {
				return
			}
			cursor, first = int64(batch[len(batch)-1].ID), false
		}
	}
}

// duePageBatch reads up to duePageBatch due pages with IDs after cursor
// (from cursor itself on the first batch).
func (s *Store) duePageBatch(ctx context.Context, cutoff, cursor int64, first bool) ([]storage.Page, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	op := ">"
	if first {
		op = ">="
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT id, data FROM pages WHERE due <= ? AND id "+op+" ? ORDER BY id LIMIT ?", cutoff, cursor, duePageBatch)
	if err != nil {
		return nil, s.wrap("due pages", err)
	}
	defer rows.Close()
	var out []storage.Page
	for rows.Next() {
		var id int64
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, s.wrap("due pages", err)
		}
		p := storage.Page{ID: uint64(id)}
		if err := p.State.UnmarshalBinary(data); err != nil {
			return nil, fmt.Errorf("sqlitestore: page %d: %w", p.ID, err)
		}
		out = append(out, p)
	}
	return out, s.wrap("due pages", rows.Err())
}
