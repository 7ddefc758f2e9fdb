package warc_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// commitLoops counts the goroutines running a Writer's commit loop.
func commitLoops() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "warc.(*Writer).commitLoop")
}

// TestConcurrentRecordsAllReachTheFile archives pages from many goroutines
// at once, so that the commit loop writes several exchanges per batch:
// every record is in the file once, indexed nowhere (resources are not),
// and Close leaves no goroutine of the Writer behind.
func TestConcurrentRecordsAllReachTheFile(t *testing.T) {
	before := commitLoops()
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				u, _ := url.Parse(fmt.Sprintf("http://example.test/%d/%d", g, i))
				res := &magpie.FetchResult{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}},
					Body: []byte(fmt.Sprintf("<html><title>%d/%d</title></html>", g, i))}
				if err := w.ArchiveFetched(&magpie.FetchRequest{URL: u, Method: http.MethodGet}, res, time.Now()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("ArchiveFetched() = %v", err)
	}
	if got := commitLoops(); got != before+1 {
		t.Errorf("%d commit loops running during the crawl, want %d", got, before+1)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if got := commitLoops(); got != before {
		t.Errorf("%d commit loops after Close, want %d", got, before)
	}
	seen := make(map[string]int)
	for _, r := range readAll(t, dir) {
		if r.typ == "resource" {
			seen[r.uri]++
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct resource records, want %d", len(seen), writers*each)
	}
	for uri, n := range seen {
		if n != 1 {
			t.Errorf("%s archived %d times", uri, n)
		}
	}
	if got := w.Counts(); got.Resource != writers*each || got.Files != 1 {
		t.Errorf("Counts() = %+v, want %d resources in 1 file", got, writers*each)
	}
}

// TestArchivingAfterCloseFails checks that Close is final: a record handed
// over afterwards fails with ErrClosed, a second Close returns what the
// first did, and a Writer that never wrote closes without a file or a
// goroutine.
func TestArchivingAfterCloseFails(t *testing.T) {
	before := commitLoops()
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close() of an unused Writer = %v", err)
	}
	if got := commitLoops(); got != before {
		t.Errorf("%d commit loops after closing an unused Writer, want %d", got, before)
	}
	u, _ := url.Parse("http://example.test/late")
	err = w.ArchiveFetched(&magpie.FetchRequest{URL: u}, &magpie.FetchResult{StatusCode: 200, Body: []byte("late")}, time.Now())
	if !errors.Is(err, warc.ErrClosed) {
		t.Errorf("ArchiveFetched after Close = %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if got := w.Counts(); got != (warc.Counts{}) {
		t.Errorf("Counts() = %+v, want none", got)
	}
}
