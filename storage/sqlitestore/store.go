package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// Compile-time checks that Store implements every interface it promises.
var (
	_ storage.Storage       = (*Store)(nil)
	_ storage.VisitedSet    = (*Store)(nil)
	_ storage.CookieStore   = (*Store)(nil)
	_ storage.Queue         = (*Store)(nil)
	_ storage.QueueNotifier = (*Store)(nil)
	_ storage.LeaseRenewer  = (*Store)(nil)
	_ storage.BatchReleaser = (*Store)(nil)
	_ storage.VisitedPusher = (*Store)(nil)
	_ storage.PageStore     = (*Store)(nil)
	_ storage.HostQueue     = (*Store)(nil)
)

// schemaVersion is the PRAGMA user_version this package writes.
const schemaVersion = 4

// migrations[i] takes a file from user_version i to i+1.
var migrations = []string{
	`CREATE TABLE visited (id INTEGER PRIMARY KEY);
	CREATE TABLE queue (
		seq         INTEGER PRIMARY KEY AUTOINCREMENT,
		data        BLOB    NOT NULL,
		not_before  INTEGER NOT NULL DEFAULT 0,
		lease_until INTEGER,
		lease_token INTEGER,
		lease_owner INTEGER,
		deliveries  INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX queue_lease_owner ON queue (lease_owner) WHERE lease_owner IS NOT NULL;
	CREATE TABLE cookies (host TEXT PRIMARY KEY, data TEXT NOT NULL);
	CREATE TABLE owners (owner INTEGER PRIMARY KEY, pid INTEGER NOT NULL, host TEXT NOT NULL, started INTEGER NOT NULL);
	CREATE TABLE hosts (host TEXT PRIMARY KEY, next_start INTEGER NOT NULL DEFAULT 0, in_flight INTEGER NOT NULL DEFAULT 0);`,
	// Version 2: the host limiter. Requests in flight become one leased row
	// each in slots, so a dead process's slots expire; a counter in hosts
	// could not tell whose they were. Nothing ever wrote in_flight.
	`CREATE TABLE slots (
		host    TEXT    NOT NULL,
		token   INTEGER NOT NULL,
		expires INTEGER NOT NULL,
		PRIMARY KEY (host, token)
	) WITHOUT ROWID;
	ALTER TABLE hosts DROP COLUMN in_flight;`,
	// Version 3: the recrawl state of each page (storage.PageState,
	// encoded), with its due time in a column for DuePages. No index on
	// due: DuePages scans once per run, and an index would cost every
	// page another 20 bytes.
	`CREATE TABLE pages (id INTEGER PRIMARY KEY, due INTEGER NOT NULL, data BLOB NOT NULL);`,
	// Version 4: the host-aware queue (storage.HostQueue); see
	// queue_hosts.go. The entries a version 3 file holds get the host ""
	// and the priority 0, as Push gives them.
	migrateHostQueue,
}

// Option configures Open.
type Option func(*config)

type config struct {
	maxSize     int
	busyTimeout time.Duration
	visitedTTL  time.Duration // WithVisitedTTL; see ttl.go
}

// WithMaxSize makes Push fail with storage.ErrQueueFull when the queue would
// hold more than n entries (leased ones included). n <= 0 means no limit,
// the default.
func WithMaxSize(n int) Option { return func(c *config) { c.maxSize = n } }

// WithBusyTimeout sets how long a write waits for another connection (another
// Store or process on the same file) to release the lock before failing with
// SQLITE_BUSY. The default is 10 seconds.
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

// Store is a crawl's state in one SQLite file. Create it with Open; it is
// safe for concurrent use, and the caller must Close it. After Close every
// method returns storage.ErrClosed.
type Store struct {
	db      *sql.DB
	cfg     config
	owner   int64 // this Store's row in owners; its leases carry it
	closed  atomic.Bool
	closeMu sync.Mutex // serialises Close
	wake    waker
	// Statements of the queue's hot path, prepared once: compiling them in
	// every transaction cost more than running them.
	isVisited, leaseReady, addVisited, getCookies *sql.Stmt
	// prepared holds the statements of preparedQueries by their text.
	prepared map[string]*sql.Stmt
	// stmts counts the statements run through exec, eachRow and queryRow,
	// for tests of what a call costs.
	stmts atomic.Int64
}

// prepare compiles the hot-path statements. Transactions use them through
// Tx.StmtContext, which runs them on the Store's one connection as they are.
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.isVisited, "SELECT 1 FROM visited WHERE id = ?"},
		{&s.leaseReady, leaseQuery},
		{&s.addVisited, "INSERT INTO visited (id) VALUES (?) ON CONFLICT DO NOTHING"},
		{&s.getCookies, "SELECT data FROM cookies WHERE host = ?"},
	} {
		st, err := s.db.PrepareContext(ctx, p.query)
		if err != nil {
			return err
		}
		*p.dst = st
	}
	s.prepared = make(map[string]*sql.Stmt, len(preparedQueries))
	for _, q := range preparedQueries {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		s.prepared[q] = st
	}
	return nil
}

// closeStmts closes the prepared statements.
func (s *Store) closeStmts() {
	for _, st := range []*sql.Stmt{s.isVisited, s.leaseReady, s.addVisited, s.getCookies} {
		if st != nil {
			_ = st.Close()
		}
	}
	for _, st := range s.prepared {
		_ = st.Close()
	}
}

// Open opens (creating if needed) the SQLite file at path and brings its
// schema up to date. Leases held by processes on this host that no longer
// run are returned to the queue. The returned Store must be closed.
func Open(path string, opts ...Option) (*Store, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("%w: %q", ErrInvalidPath, path)
	}
	cfg := config{busyTimeout: 10 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// Visited IDs are hashes, so inserts land on random pages: a 64 MiB
	// page cache keeps a few million of them from thrashing the default 2 MiB.
	q.Add("_pragma", "cache_size(-65536)")
	// Statement journals (multi-row inserts) stay in memory, not temp files.
	q.Add("_pragma", "temp_store(MEMORY)")
	// Immediate transactions take the write lock at BEGIN, so two writers
	// queue on busy_timeout instead of one failing to upgrade a read lock.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, classify(err))
	}
	// One connection: writes are serialised in-process by database/sql rather
	// than by SQLite's file lock, and a ":memory:" database is one database.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, cfg: cfg, owner: rand.Int64()}
	s.wake.init()
	ctx := context.Background()
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, classify(err))
	}
	if err := s.prepareTTL(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.closeStmts()
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, classify(err))
	}
	if err := s.register(ctx); err != nil {
		s.closeStmts()
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, classify(err))
	}
	return s, nil
}

// migrate applies the migrations the file lacks, in one transaction.
func (s *Store) migrate(ctx context.Context) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		if v > schemaVersion {
			return fmt.Errorf("%w: file has %d, this package knows up to %d", ErrSchemaVersion, v, schemaVersion)
		}
		for ; v < schemaVersion; v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v+1, err)
			}
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
		return err
	})
}

// register records this Store as a lease owner and returns the leases of
// owners on this host whose process is gone: they will never be acked, and
// waiting for their TTL would only delay the resumed crawl.
func (s *Store) register(ctx context.Context) error {
	host, _ := os.Hostname()
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO owners (owner, pid, host, started) VALUES (?, ?, ?, ?)",
			s.owner, os.Getpid(), host, time.Now().UnixNano()); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT owner, pid FROM owners WHERE host = ? AND owner != ?", host, s.owner)
		if err != nil {
			return err
		}
		var dead []int64
		for rows.Next() {
			var owner int64
			var pid int
			if err := rows.Scan(&owner, &pid); err != nil {
				rows.Close()
				return err
			}
			if !processAlive(pid) {
				dead = append(dead, owner)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, owner := range dead {
			if err := s.releaseOwner(ctx, tx, owner); err != nil {
				return err
			}
		}
		return nil
	})
}

// releaseOwner returns an owner's leases to the queue and forgets the owner.
func (s *Store) releaseOwner(ctx context.Context, tx *sql.Tx, owner int64) error {
	var b hostBook
	err := s.eachRow(ctx, tx, releaseOwnerQuery, []any{owner}, func(rows *sql.Rows) error {
		var host, rank, seq int64
		var candidate bool
		if err := rows.Scan(&host, &rank, &seq, &candidate); err != nil {
			return err
		}
		b.at(host).leased--
		if candidate {
			b.gain(host, rank, seq)
		}
		return nil
	})
	if err == nil {
		err = s.flush(ctx, tx, &b)
	}
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "DELETE FROM owners WHERE owner = ?", owner)
	return err
}

// releaseOwnerQuery returns the leases of owner ?1 to the queue.
const releaseOwnerQuery = `UPDATE queue
	SET lease_until = NULL, lease_token = NULL, lease_owner = NULL, not_before = MAX(not_before, 0)
	WHERE lease_until IS NOT NULL AND lease_owner = ?1 RETURNING host_id, rank, seq, not_before = 0`

// Close returns this Store's unacknowledged leases to the queue, so a
// restarted crawl gets them at once, and closes the file. Entries, visited
// IDs and cookies persist. Calling Close again returns nil.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Load() {
		return nil
	}
	err := s.tx(context.Background(), func(tx *sql.Tx) error {
		return s.releaseOwner(context.Background(), tx, s.owner)
	})
	s.closed.Store(true)
	s.wake.stop()
	s.closeStmts()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: close: %w", err)
	}
	return nil
}

// tx runs f in an immediate (write-locked) transaction and commits it.
func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback() // the error from f is the one worth reporting
		return err
	}
	return tx.Commit()
}

// check returns ErrClosed once the Store is closed.
func (s *Store) check() error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// wrap names the failed operation and turns errors caused by a concurrent
// Close into ErrClosed.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("sqlitestore: %s: %w", op, storage.ErrClosed)
	}
	return fmt.Errorf("sqlitestore: %s: %w", op, classify(err))
}
