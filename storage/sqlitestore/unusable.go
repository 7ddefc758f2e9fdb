package sqlitestore

import (
	"errors"
	"fmt"

	"github.com/magpiecrawl/magpie/storage"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// unusable reports whether err is a SQLite error that retrying cannot fix:
// a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB), a file that can no longer
// be written (SQLITE_READONLY, which includes a file deleted or moved under
// the Store) or opened (SQLITE_CANTOPEN). SQLITE_BUSY, SQLITE_LOCKED and
// I/O errors are not: another process holds the lock for a while, or the
// disk may come back.
func unusable(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
		return true
	}
	return false
}

// classify wraps err with storage.ErrStoreUnusable when it is unusable, so
// that a crawl stops on it instead of waiting as for an outage; SQLite's
// error stays reachable with errors.As.
func classify(err error) error {
	if err == nil || !unusable(err) || errors.Is(err, storage.ErrStoreUnusable) {
		return err
	}
	return fmt.Errorf("%w: %w", storage.ErrStoreUnusable, err)
}
