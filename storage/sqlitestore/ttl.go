package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Expiring visited marks (WithVisitedTTL). A mark is still a row of
// visited, so every reader of the set (IsVisited, AddVisited,
// PushUnvisited) works unchanged; visited_expiry holds when each mark made
// under a TTL ends, and a Store with a TTL deletes the marks that ended at
// the start of each transaction that reads the set. IsVisited, which runs
// outside one, checks the expiry itself. Every Store on a file should use
// the same setting: a Store without a TTL does not purge, and a mark it
// makes is permanent unless a Store with a TTL marks the ID again.

// WithVisitedTTL makes each visited mark expire d after it was made, so that
// a later round crawls the URL again (Colly's redisstorage Expires). d <= 0
// means marks never expire, the default.
func WithVisitedTTL(d time.Duration) Option {
	return func(c *config) { c.visitedTTL = max(d, 0) }
}

// prepareTTL creates the expiry table when the Store has a TTL. It is
// created outside the numbered migrations, idempotently, so a file opened
// without a TTL keeps its schema.
func (s *Store) prepareTTL(ctx context.Context) error {
	if s.cfg.visitedTTL <= 0 {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS visited_expiry (id INTEGER PRIMARY KEY, expires INTEGER NOT NULL);
		CREATE INDEX IF NOT EXISTS visited_expiry_at ON visited_expiry (expires);`)
	return err
}

// purgeExpired deletes the marks whose TTL has passed.
func (s *Store) purgeExpired(ctx context.Context, tx *sql.Tx) error {
	if s.cfg.visitedTTL <= 0 {
		return nil
	}
	now := time.Now().UnixNano()
	if _, err := tx.ExecContext(ctx,
		"DELETE FROM visited WHERE id IN (SELECT id FROM visited_expiry WHERE expires <= ?)", now); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "DELETE FROM visited_expiry WHERE expires <= ?", now)
	return err
}

// noteExpiry records when the marks this AddVisited made (added[i]) end.
func (s *Store) noteExpiry(ctx context.Context, tx *sql.Tx, ids []uint64, added []bool) error {
	if s.cfg.visitedTTL <= 0 {
		return nil
	}
	until := time.Now().Add(s.cfg.visitedTTL).UnixNano()
	stmt, err := tx.PrepareContext(ctx,
		"INSERT INTO visited_expiry (id, expires) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET expires = excluded.expires")
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i, id := range ids {
		if !added[i] {
			continue
		}
		if _, err := stmt.ExecContext(ctx, int64(id), until); err != nil {
			return err
		}
	}
	return nil
}

// forgetExpiry drops the expiry of marks RemoveVisited deletes.
func (s *Store) forgetExpiry(ctx context.Context, tx *sql.Tx, ids []uint64) error {
	if s.cfg.visitedTTL <= 0 {
		return nil
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, "DELETE FROM visited_expiry WHERE id = ?", int64(id)); err != nil {
			return err
		}
	}
	return nil
}

// isVisitedTTL is IsVisited for a Store with a TTL: a mark whose TTL has
// passed but is not purged yet does not count.
func (s *Store) isVisitedTTL(id uint64) (bool, error) {
	var one int
	err := s.db.QueryRow(`SELECT 1 FROM visited v LEFT JOIN visited_expiry e ON e.id = v.id
		WHERE v.id = ? AND (e.expires IS NULL OR e.expires > ?)`, int64(id), time.Now().UnixNano()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("is visited", err)
	}
	return true, nil
}
