package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// visitedChunk bounds the rows of one INSERT, well under SQLite's limit
// of 32766 bound parameters.
const visitedChunk = 500

// Init implements storage.Storage. Open already prepared the file, so Init
// only reports whether the Store is still open.
func (s *Store) Init() error { return s.check() }

// Visited marks requestID visited.
func (s *Store) Visited(requestID uint64) error {
	_, err := s.AddVisited(context.Background(), requestID)
	return err
}

// IsVisited reports whether requestID is visited.
func (s *Store) IsVisited(requestID uint64) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if s.cfg.visitedTTL > 0 {
		return s.isVisitedTTL(requestID)
	}
	var one int
	err := s.db.QueryRow("SELECT 1 FROM visited WHERE id = ?", int64(requestID)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("is visited", err)
	}
	return true, nil
}

// AddVisited implements storage.VisitedSet in one transaction. The IDs are
// stored as the int64 with the same bits; a primary-key conflict tells that
// another caller (this process or another one on the same file) added the ID
// first.
func (s *Store) AddVisited(ctx context.Context, ids ...uint64) ([]bool, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) (err error) {
		if err := s.purgeExpired(ctx, tx); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				err = s.noteExpiry(ctx, tx, ids, out)
			}
		}()
		if len(ids) <= smallVisitedBatch {
			// The prepared one-row INSERT, once per ID: cheaper than
			// compiling a multi-row statement for a few IDs. A repeated
			// ID is added by its first occurrence only.
			stmt := tx.StmtContext(ctx, s.addVisited)
			for i, id := range ids {
				res, err := stmt.ExecContext(ctx, int64(id))
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				out[i] = n == 1
			}
			return nil
		}
		// One multi-row INSERT per chunk: RETURNING lists the IDs this
		// statement inserted, which are exactly the ones this call added.
		added := make(map[int64]bool, len(ids))
		for start := 0; start < len(ids); start += visitedChunk {
			chunk := ids[start:min(start+visitedChunk, len(ids))]
			args := make([]any, len(chunk))
			for i, id := range chunk {
				args[i] = int64(id)
			}
			q := "INSERT INTO visited (id) VALUES (?)" + strings.Repeat(", (?)", len(chunk)-1) +
				" ON CONFLICT DO NOTHING RETURNING id"
			rows, err := tx.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				added[id] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for i, id := range ids {
			// A repeated ID in one batch is added by its first occurrence only.
			out[i] = added[int64(id)]
			delete(added, int64(id))
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("add visited", err)
	}
	return out, nil
}

// smallVisitedBatch is the most IDs AddVisited inserts one statement at a
// time; larger batches go in multi-row statements.
const smallVisitedBatch = 64

// RemoveVisited implements storage.VisitedSet; absent IDs are ignored.
func (s *Store) RemoveVisited(ctx context.Context, ids ...uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.forgetExpiry(ctx, tx, ids); err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, "DELETE FROM visited WHERE id = ?")
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, id := range ids {
			if _, err := stmt.ExecContext(ctx, int64(id)); err != nil {
				return err
			}
		}
		return nil
	})
	return s.wrap("remove visited", err)
}

// Cookies implements storage.Storage; it returns "" on error, as the
// interface has no error result. GetCookies reports errors.
func (s *Store) Cookies(u *url.URL) string {
	c, _ := s.GetCookies(context.Background(), u)
	return c
}

// SetCookies implements storage.Storage; errors are dropped, as the
// interface has no error result. PutCookies reports them.
func (s *Store) SetCookies(u *url.URL, cookies string) {
	_ = s.PutCookies(context.Background(), u, cookies)
}

// GetCookies implements storage.CookieStore: the cookies of u's host that
// apply to u, as newline-joined Set-Cookie lines, attributes kept.
func (s *Store) GetCookies(ctx context.Context, u *url.URL) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	var stored string
	err := s.getCookies.QueryRowContext(ctx, storage.CookieHost(u)).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", s.wrap("get cookies", err)
	}
	return storage.SelectCookies(stored, u, time.Now()), nil
}

// PutCookies implements storage.CookieStore: it merges newline-joined
// Set-Cookie lines received from u into its host's cookies, by name, in one
// transaction.
func (s *Store) PutCookies(ctx context.Context, u *url.URL, cookies string) error {
	if err := s.check(); err != nil {
		return err
	}
	host := storage.CookieHost(u)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var stored string
		err := tx.QueryRowContext(ctx, "SELECT data FROM cookies WHERE host = ?", host).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		merged := storage.MergeCookies(stored, cookies, time.Now())
		if merged == "" {
			_, err = tx.ExecContext(ctx, "DELETE FROM cookies WHERE host = ?", host)
			return err
		}
		_, err = tx.ExecContext(ctx,
			"INSERT INTO cookies (host, data) VALUES (?, ?) ON CONFLICT (host) DO UPDATE SET data = excluded.data", host, merged)
		return err
	})
	return s.wrap("put cookies", err)
}
