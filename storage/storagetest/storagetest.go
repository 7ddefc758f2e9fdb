// Package storagetest is the conformance suite every storage backend runs:
// RunQueue and RunQueueReopen for storage.Queue, RunHostQueue and
// RunHostQueueReopen for storage.HostQueue, RunVisited for
// storage.VisitedSet, RunCookies for storage.CookieStore.
//
// A backend's test calls the Run functions with an opener that returns a
// fresh, empty store for each subtest (register any extra clean-up, such as
// deleting Redis keys, with t.Cleanup inside the opener). The suite closes
// what it opens; a second Close may return nil or storage.ErrClosed.
//
// Backends may be real servers (Redis) or files (SQLite), so time-dependent
// checks — delayed entries, lease expiry — use short real durations (about
// 250 ms) and wait with generous deadlines, not testing/synctest, which
// cannot drive another process's clock. The in-memory queue additionally has
// synctest tests of its own in package storage.
package storagetest

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// short is the lease TTL and delay used by time-dependent checks; waitFor
// bounds every wait so that a broken store fails instead of hanging.
const (
	short   = 250 * time.Millisecond
	waitFor = 10 * time.Second
	tick    = 5 * time.Millisecond
)

// closeStore closes s if it is an io.Closer, tolerating a second Close.
func closeStore(t *testing.T, s any) {
	t.Helper()
	c, ok := s.(io.Closer)
	if !ok {
		return
	}
	if err := c.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Close() error = %v, want nil", err)
	}
}

// eventually calls cond every tick until it reports true, failing the test
// after waitFor. It must be called from the test goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, waitFor)
		}
		<-tk.C
	}
}
