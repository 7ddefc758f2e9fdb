package storagetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// RunPages runs the conformance suite for a storage.PageStore (the per-URL
// state of recrawls). open must return a fresh, empty store on every call;
// the suite closes it when it is an io.Closer.
//
// Contract checked: a state round-trips (to the millisecond, LastModified
// to the second, a Capture's date to the nanosecond) for any uint64 ID; GetPages reports absent IDs as not
// found, in order, repeats included; PutPages replaces; DuePages yields
// exactly the pages due by its argument, each once, across more pages than
// a store reads in one batch, lets the loop write to the store and stop
// early; a cancelled context and a closed store fail. A store that is also
// the Queue and a storage.PageAcker stores with AckPages the pages of the
// leases it acknowledged, and only those.
func RunPages(t *testing.T, open func(t *testing.T) storage.PageStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, p storage.PageStore)
	}{
		{"RoundTrip", pagesRoundTrip},
		{"Replace", pagesReplace},
		{"Due", pagesDue},
		{"DueMany", pagesDueMany},
		{"DueWhileWriting", pagesDueWhileWriting},
		{"Cancelled", pagesCancelled},
		{"Closed", pagesClosed},
		{"AckPages", pagesAck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := open(t)
			t.Cleanup(func() { closeStore(t, p) })
			tt.run(t, p)
		})
	}
}

// samplePage is a state with every field set, at a time that survives the
// stores' precision.
func samplePage(i int) storage.PageState {
	base := time.UnixMilli(1_700_000_000_123).Add(time.Duration(i) * time.Minute)
	return storage.PageState{
		URL:          fmt.Sprintf("https://example.com/docs/section-%d.html?q=%d", i, i),
		Fetched:      base,
		Status:       200,
		ETag:         fmt.Sprintf(`W/"%x-5f3a"`, i),
		LastModified: time.Unix(1_690_000_000+int64(i), 0).UTC(),
		Digest:       uint64(i)*0x9e3779b97f4a7c15 + 1,
		Due:          base.Add(36 * time.Hour),
		Interval:     36 * time.Hour,
		Change:       uint8(i % 5),
		Depth:        i%7 + 1,
		// The capture of an archived page: under the page's URL, or under
		// another (a redirect's target); to the nanosecond.
		Capture: storage.Capture{
			RecordID:      fmt.Sprintf("urn:uuid:00000000-0000-4000-8000-%012d", i),
			URI:           fmt.Sprintf("https://example.com/docs/section-%d.html?q=%d", i+i%2, i),
			Date:          base.Add(-time.Duration(i) * time.Nanosecond).UTC(),
			PayloadDigest: fmt.Sprintf("sha1:%032d", i),
		},
	}
}

func samePage(a, b storage.PageState) bool {
	return a.URL == b.URL && a.Fetched.Equal(b.Fetched) && a.Status == b.Status && a.ETag == b.ETag &&
		a.LastModified.Equal(b.LastModified) && a.Digest == b.Digest && a.Due.Equal(b.Due) &&
		a.Interval == b.Interval && a.Change == b.Change && a.Capture.RecordID == b.Capture.RecordID &&
		a.Capture.URI == b.Capture.URI && a.Capture.Date.Equal(b.Capture.Date) && a.Capture.PayloadDigest == b.Capture.PayloadDigest &&
		a.Depth == b.Depth
}

func mustPut(t *testing.T, p storage.PageStore, pages ...storage.Page) {
	t.Helper()
	if err := p.PutPages(t.Context(), pages...); err != nil {
		t.Fatalf("PutPages(%d pages) error = %v", len(pages), err)
	}
}

func pagesRoundTrip(t *testing.T, p storage.PageStore) {
	ids := []uint64{0, 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}
	var pages []storage.Page
	for i, id := range ids {
		pages = append(pages, storage.Page{ID: id, State: samplePage(i)})
	}
	pages[1].State = storage.PageState{URL: "http://a/", Status: 404} // sparse: zero times, no validators
	mustPut(t, p, pages...)
	ask := append([]uint64{42}, ids...)
	ask = append(ask, 1) // a repeat
	states, found, err := p.GetPages(t.Context(), ask...)
	if err != nil || len(states) != len(ask) || len(found) != len(ask) {
		t.Fatalf("GetPages(%v) = %d states, %d found, %v; want %d each, nil", ask, len(states), len(found), err, len(ask))
	}
	if found[0] {
		t.Errorf("GetPages(42) found = true, want false for an ID never put")
	}
	for i, pg := range append(pages, pages[1]) {
		if !found[i+1] || !samePage(states[i+1], pg.State) {
			t.Errorf("GetPages(%d) = %+v, %v; want %+v, true", pg.ID, states[i+1], found[i+1], pg.State)
		}
	}
	if s, f, err := p.GetPages(t.Context()); err != nil || len(s) != 0 || len(f) != 0 {
		t.Errorf("GetPages() = %v, %v, %v; want empty, nil", s, f, err)
	}
	if err := p.PutPages(t.Context()); err != nil {
		t.Errorf("PutPages() error = %v, want nil", err)
	}
}

func pagesReplace(t *testing.T, p storage.PageStore) {
	first, second := samplePage(1), samplePage(2)
	second.ETag = ""
	mustPut(t, p, storage.Page{ID: 7, State: first})
	mustPut(t, p, storage.Page{ID: 7, State: second})
	states, found, err := p.GetPages(t.Context(), 7)
	if err != nil || !found[0] || !samePage(states[0], second) {
		t.Errorf("GetPages(7) after a second PutPages = %+v, %v, %v; want %+v", states, found, err, second)
	}
}

// collectDue runs DuePages to its end and returns the IDs, failing on a
// repeat or an error.
func collectDue(t *testing.T, p storage.PageStore, before time.Time) map[uint64]storage.PageState {
	t.Helper()
	got := map[uint64]storage.PageState{}
	for pg, err := range p.DuePages(t.Context(), before) {
		if err != nil {
			t.Fatalf("DuePages(%v) error = %v", before, err)
		}
		if _, dup := got[pg.ID]; dup {
			t.Fatalf("DuePages(%v) yielded %d twice", before, pg.ID)
		}
		got[pg.ID] = pg.State
	}
	return got
}

func pagesDue(t *testing.T, p storage.PageStore) {
	now := time.UnixMilli(1_800_000_000_000)
	var pages []storage.Page
	for i := range 10 {
		st := samplePage(i)
		st.Due = now.Add(time.Duration(i-5) * time.Second) // 0..4 past, 5 exactly now, 6..9 future
		pages = append(pages, storage.Page{ID: uint64(i) * (math.MaxUint64 / 10), State: st})
	}
	mustPut(t, p, pages...)
	got := collectDue(t, p, now)
	if len(got) != 6 {
		t.Errorf("DuePages(now) yielded %d pages, want 6 (due before or at now)", len(got))
	}
	for i, pg := range pages {
		st, ok := got[pg.ID]
		if want := i <= 5; ok != want {
			t.Errorf("DuePages(now) has page %d (due %v) = %v, want %v", i, pg.State.Due.Sub(now), ok, want)
		}
		if ok && !samePage(st, pg.State) {
			t.Errorf("DuePages(now) page %d = %+v, want %+v", i, st, pg.State)
		}
	}
	n := 0
	for _, err := range p.DuePages(t.Context(), now) {
		if err != nil {
			t.Fatalf("DuePages error = %v", err)
		}
		if n++; n == 2 {
			break // stopping early must not panic or leak
		}
	}
	if got := collectDue(t, p, now.Add(-time.Hour)); len(got) != 0 {
		t.Errorf("DuePages(an hour ago) yielded %d pages, want 0", len(got))
	}
}

func pagesDueMany(t *testing.T, p storage.PageStore) {
	const n = 1300 // more than one batch of any store
	now := time.UnixMilli(1_800_000_000_000)
	pages := make([]storage.Page, n)
	for i := range pages {
		st := samplePage(i)
		st.Due = now.Add(-time.Duration(i%3) * time.Second)
		if i%4 == 0 {
			st.Due = now.Add(time.Hour)
		}
		pages[i] = storage.Page{ID: uint64(i)*0x9e3779b97f4a7c15 + 3, State: st}
	}
	mustPut(t, p, pages...)
	got := collectDue(t, p, now)
	if want := n - (n+3)/4; len(got) != want {
		t.Errorf("DuePages over %d pages yielded %d, want %d", n, len(got), want)
	}
}

func pagesDueWhileWriting(t *testing.T, p storage.PageStore) {
	now := time.UnixMilli(1_800_000_000_000)
	const n = 700
	pages := make([]storage.Page, n)
	for i := range pages {
		st := samplePage(i)
		st.Due = now.Add(-time.Minute)
		pages[i] = storage.Page{ID: uint64(i + 1), State: st}
	}
	mustPut(t, p, pages...)
	seen := map[uint64]bool{}
	for pg, err := range p.DuePages(t.Context(), now) {
		if err != nil {
			t.Fatalf("DuePages error = %v", err)
		}
		if seen[pg.ID] {
			t.Fatalf("DuePages yielded %d twice while pages were written", pg.ID)
		}
		seen[pg.ID] = true
		// What a recrawl does: the page is fetched and scheduled later.
		pg.State.Due = now.Add(time.Hour)
		mustPut(t, p, pg)
	}
	if len(seen) != n {
		t.Errorf("DuePages yielded %d pages while rescheduling them, want %d", len(seen), n)
	}
	if got := collectDue(t, p, now); len(got) != 0 {
		t.Errorf("DuePages after rescheduling every page yielded %d, want 0", len(got))
	}
}

func pagesCancelled(t *testing.T, p storage.PageStore) {
	mustPut(t, p, storage.Page{ID: 1, State: samplePage(1)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.PutPages(ctx, storage.Page{ID: 2, State: samplePage(2)}); err == nil {
		t.Errorf("PutPages(cancelled) error = nil, want an error")
	}
	if _, _, err := p.GetPages(ctx, 1); err == nil {
		t.Errorf("GetPages(cancelled) error = nil, want an error")
	}
	var derr error
	for _, err := range p.DuePages(ctx, time.Now().Add(100*24*time.Hour)) {
		if err != nil {
			derr = err
			break
		}
	}
	if derr == nil {
		t.Errorf("DuePages(cancelled) yielded no error, want one")
	}
}

func pagesClosed(t *testing.T, p storage.PageStore) {
	c, ok := p.(interface{ Close() error })
	if !ok {
		t.Skipf("%T has no Close", p)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if err := p.PutPages(t.Context(), storage.Page{ID: 1}); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("PutPages after Close error = %v, want ErrClosed", err)
	}
	if _, _, err := p.GetPages(t.Context(), 1); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("GetPages after Close error = %v, want ErrClosed", err)
	}
	var derr error
	for _, err := range p.DuePages(t.Context(), time.Now()) {
		derr = err
		break
	}
	if !errors.Is(derr, storage.ErrClosed) {
		t.Errorf("DuePages after Close yielded error %v, want ErrClosed", derr)
	}
}

// pagesAck checks storage.PageAcker: of three pages, the one whose lease is
// acknowledged is stored; the one of a lease not held, and the one of a
// lease left out of ids, are not, and that entry stays leased.
func pagesAck(t *testing.T, p storage.PageStore) {
	pa, ok := p.(storage.PageAcker)
	q, isQueue := p.(storage.Queue)
	if !ok || !isQueue {
		t.Skipf("%T is not a Queue and a PageAcker", p)
	}
	ctx := t.Context()
	if err := q.Push(ctx, []byte("a"), []byte("b")); err != nil {
		t.Fatalf("Push error = %v", err)
	}
	leased, err := q.Lease(ctx, 2, time.Minute)
	if err != nil || len(leased) != 2 {
		t.Fatalf("Lease(2) = %d entries, %v; want 2", len(leased), err)
	}
	bogus := leased[0].ID + "0"
	pages := []storage.LeasePage{
		{Lease: leased[0].ID, Page: storage.Page{ID: 1, State: samplePage(1)}},
		{Lease: bogus, Page: storage.Page{ID: 2, State: samplePage(2)}},
		{Lease: leased[1].ID, Page: storage.Page{ID: 3, State: samplePage(3)}},
	}
	if err := pa.AckPages(ctx, []string{leased[0].ID, bogus}, pages); !errors.Is(err, storage.ErrUnknownLease) {
		t.Errorf("AckPages with a lease not held error = %v, want ErrUnknownLease", err)
	}
	states, found, err := p.GetPages(ctx, 1, 2, 3)
	if err != nil {
		t.Fatalf("GetPages error = %v", err)
	}
	if !found[0] || !samePage(states[0], samplePage(1)) {
		t.Errorf("page of the acknowledged lease: found %v, %+v; want %+v", found[0], states[0], samplePage(1))
	}
	if found[1] || found[2] {
		t.Errorf("pages of a lease not held and of one not acknowledged stored: found %v", found[1:])
	}
	n, err := q.Len(ctx)
	if err != nil || n.Total() != 1 {
		t.Errorf("Len after AckPages = %+v, %v; want the unacknowledged entry left", n, err)
	}
	if err := pa.AckPages(ctx, []string{leased[1].ID}, nil); err != nil {
		t.Errorf("AckPages without pages error = %v", err)
	}
	if n, err := q.Len(ctx); err != nil || n.Total() != 0 {
		t.Errorf("Len after the last AckPages = %+v, %v; want 0", n, err)
	}
}
