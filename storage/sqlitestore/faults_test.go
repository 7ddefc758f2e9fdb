package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
)

// leafSite serves /p/N pages without links and counts fetches per page.
type leafSite struct {
	*httptest.Server
	mu     sync.Mutex // guards counts
	counts map[int]int
}

func newLeafSite(t *testing.T) *leafSite {
	t.Helper()
	s := &leafSite{counts: map[int]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.counts[i]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body>page %d</body></html>", i)
	}))
	t.Cleanup(s.Close)
	return s
}

// fetched returns the number of pages fetched and those fetched more than once.
func (s *leafSite) fetched() (pages int, twice []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, n := range s.counts {
		if n > 1 {
			twice = append(twice, p)
		}
	}
	return len(s.counts), twice
}

// pushPages queues GET requests for pages [0, n) of s, as queue.AddURL
// would, in one transaction.
func pushPages(t *testing.T, q storage.Queue, s *leafSite, n int) {
	t.Helper()
	data := make([][]byte, n)
	for i := range data {
		u, err := url.Parse(fmt.Sprintf("%s/p/%d", s.URL, i))
		if err != nil {
			t.Fatal(err)
		}
		b, err := (&magpie.Request{URL: u, Method: http.MethodGet, Depth: 1}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		data[i] = b
	}
	if err := q.Push(context.Background(), data...); err != nil {
		t.Fatal(err)
	}
}

// runFile opens the file, crawls its queue with the collector opts give
// (its visited set in the same file) and closes it again, as one process
// of a crawl resumed run after run.
func runFile(t *testing.T, path string, opts ...magpie.CollectorOption) (left int, _ error) {
	t.Helper()
	st, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	defer st.Close()
	c := magpie.NewCollector(append([]magpie.CollectorOption{magpie.IgnoreRobotsTxt()}, opts...)...)
	if err := c.SetStorage(st); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(4, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runErr := q.RunContext(ctx, c)
	if ctx.Err() != nil {
		t.Fatalf("Run did not return within 2 minutes")
	}
	n, err := q.Size()
	if err != nil && runErr == nil {
		t.Fatalf("Size() error = %v", err)
	}
	return n, runErr
}

// MaxRequests on a SQLite queue: the budget stops the leasing, and what the
// run did not fetch stays in the file for the next run. (The entries past
// the budget used to be leased, refused and acknowledged: deleted.)
func TestMaxRequestsKeepsTheRestInTheFile(t *testing.T) {
	const pages, budget = 3000, 100
	s := newLeafSite(t)
	path := filepath.Join(t.TempDir(), "crawl.db")
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pushPages(t, st, s, pages)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for run, want := range []int{budget, 2 * budget} {
		left, err := runFile(t, path, magpie.MaxRequests(budget))
		if err != nil {
			t.Fatalf("run %d: Run() error = %v", run+1, err)
		}
		if got, _ := s.fetched(); got != want {
			t.Errorf("run %d: pages fetched = %d, want %d", run+1, got, want)
		}
		if left != pages-want {
			t.Errorf("run %d: entries left in the file = %d, want %d", run+1, left, pages-want)
		}
	}
	left, err := runFile(t, path)
	if err != nil {
		t.Fatalf("last run: Run() error = %v", err)
	}
	got, twice := s.fetched()
	if got != pages || left != 0 {
		t.Errorf("after the last run: pages fetched = %d, left = %d, want %d and 0", got, left, pages)
	}
	if len(twice) > 0 {
		t.Errorf("pages fetched twice: %v", twice)
	}
}

// damage overwrites the pages of the SQLite file at path that come after
// every table's root page (those of the queue's rows, pushed last) with
// garbage, as a failing disk or a stray write would: the file still opens,
// and reading the queue finds it malformed.
func damage(t *testing.T, path string, firstPage int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", pageSize/4))
	for off := firstPage * pageSize; off < fi.Size(); off += pageSize {
		if _, err := f.WriteAt(junk, off); err != nil {
			t.Fatal(err)
		}
	}
}

// A damaged SQLite file ends the run with an error wrapping
// storage.ErrStoreUnusable (and SQLite's own): retrying cannot repair it.
// (It used to be taken for an outage: one OnError, then a run that paused
// and retried for ever.)
func TestDamagedFileEndsTheRun(t *testing.T) {
	s := newLeafSite(t)
	path := filepath.Join(t.TempDir(), "crawl.db")
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pushPages(t, st, s, 3000)
	var lastRoot int64
	if err := st.db.QueryRow("SELECT max(rootpage) FROM sqlite_schema").Scan(&lastRoot); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, path, lastRoot+1)
	_, err = runFile(t, path)
	if !errors.Is(err, storage.ErrStoreUnusable) {
		t.Fatalf("Run() error = %v, want one wrapping storage.ErrStoreUnusable", err)
	}
	t.Logf("Run() error = %v", err)
}

// A file locked by another writer (SQLITE_BUSY) is an outage, not damage:
// the run pauses, reports it once to OnError as a storage outage, and
// finishes once the lock is gone.
func TestBusyFileIsAnOutage(t *testing.T) {
	const pages = 20
	s := newLeafSite(t)
	path := filepath.Join(t.TempDir(), "crawl.db")
	st, err := Open(path, WithBusyTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pushPages(t, st, s, pages)

	// Another process's writer holds the file's write lock.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	lock, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	if err := c.SetStorage(st); err != nil {
		t.Fatal(err)
	}
	outage := make(chan error, 1)
	c.OnError(func(_ *magpie.Response, err error) {
		select {
		case outage <- err:
		default:
		}
	})
	q, err := queue.New(2, st)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Run(c) }()
	select {
	case err := <-outage:
		if !errors.Is(err, magpie.ErrStorageUnavailable) || errors.Is(err, storage.ErrStoreUnusable) {
			t.Errorf("OnError(%v): want a storage outage, not ErrStoreUnusable", err)
		}
	case err := <-done:
		t.Fatalf("Run() = %v while the file was locked, want it to wait", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("no outage reported within 2 minutes")
	}
	if _, err := lock.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() error = %v, want nil", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return within 2 minutes of the lock's release")
	}
	if got, _ := s.fetched(); got != pages {
		t.Errorf("pages fetched = %d, want %d", got, pages)
	}
}
