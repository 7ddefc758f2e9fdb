package storage_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

func TestPageStateEncoding(t *testing.T) {
	st := storage.PageState{
		URL: "https://example.com/docs/a.html", Fetched: time.UnixMilli(1_700_000_000_123), Status: 200,
		ETag: `"abc"`, LastModified: time.Unix(1_690_000_000, 0).UTC(), Digest: 0xfeedface,
		Due: time.UnixMilli(1_700_086_400_123), Interval: 24 * time.Hour, Change: 3, Depth: 4,
	}
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary() error = %v", err)
	}
	var got storage.PageState
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary() error = %v", err)
	}
	if got.URL != st.URL || !got.Fetched.Equal(st.Fetched) || got.ETag != st.ETag || !got.LastModified.Equal(st.LastModified) ||
		got.Digest != st.Digest || !got.Due.Equal(st.Due) || got.Interval != st.Interval || got.Change != st.Change || got.Status != 200 || got.Depth != 4 {
		t.Errorf("round trip = %+v, want %+v", got, st)
	}
	if len(b) > 80 {
		t.Errorf("encoded %d bytes for a %d-byte URL and %d-byte ETag, want at most 80", len(b), len(st.URL), len(st.ETag))
	}
	for n := range len(b) {
		var p storage.PageState
		if err := p.UnmarshalBinary(b[:n]); !errors.Is(err, storage.ErrBadPageState) {
			t.Fatalf("UnmarshalBinary(first %d of %d bytes) error = %v, want ErrBadPageState", n, len(b), err)
		}
	}
	bad := append([]byte{99}, b[1:]...)
	if err := got.UnmarshalBinary(bad); !errors.Is(err, storage.ErrBadPageState) {
		t.Errorf("UnmarshalBinary(version 99) error = %v, want ErrBadPageState", err)
	}
}

// TestPageStateVersion1 reads a state written before depths were kept:
// version 1 is the same encoding without the trailing depth.
func TestPageStateVersion1(t *testing.T) {
	st := storage.PageState{URL: "https://example.com/a", Fetched: time.UnixMilli(1_700_000_000_123), Status: 404, Digest: 7, Change: 4}
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	v1 := append([]byte{1}, b[1:len(b)-1]...) // Depth 0 is the last byte
	var got storage.PageState
	if err := got.UnmarshalBinary(v1); err != nil {
		t.Fatalf("UnmarshalBinary(version 1) error = %v", err)
	}
	if got.URL != st.URL || !got.Fetched.Equal(st.Fetched) || got.Status != 404 || got.Digest != 7 || got.Change != 4 || got.Depth != 0 {
		t.Errorf("version 1 read as %+v, want %+v", got, st)
	}
}

// TestPageStateCapture round-trips the capture of an archived page, to the
// nanosecond of its WARC-Date, with its URI the page's own or another (a
// redirect's target); a state cut anywhere in it fails to decode.
func TestPageStateCapture(t *testing.T) {
	for _, uri := range []string{"https://example.com/docs/a.html", "https://example.com/docs/b.html"} {
		st := storage.PageState{
			URL: "https://example.com/docs/a.html", Fetched: time.UnixMilli(1_700_000_000_123), Status: 200,
			ETag: `"abc"`, Digest: 0xfeedface, Change: 1,
			Capture: storage.Capture{
				RecordID: "urn:uuid:0f6bd5d2-7c4e-4d5e-9a57-3c1b1f1fb2a1", URI: uri,
				Date:          time.Unix(1_700_000_000, 123_456_789).UTC(),
				PayloadDigest: "sha1:2SFGDKE7Q25N2I4VKZCRQHQDNEOQIZFV",
			},
		}
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary() error = %v", err)
		}
		var got storage.PageState
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary() error = %v", err)
		}
		if c := got.Capture; c.RecordID != st.Capture.RecordID || c.URI != uri || !c.Date.Equal(st.Capture.Date) ||
			c.PayloadDigest != st.Capture.PayloadDigest || got.URL != st.URL || got.ETag != st.ETag {
			t.Errorf("round trip = %+v, want %+v", got, st)
		}
		for n := range len(b) {
			var p storage.PageState
			if err := p.UnmarshalBinary(b[:n]); !errors.Is(err, storage.ErrBadPageState) {
				t.Fatalf("UnmarshalBinary(first %d of %d bytes) error = %v, want ErrBadPageState", n, len(b), err)
			}
		}
	}
}

// BenchPage is a page state as a documentation crawl stores it: a 60-odd
// byte URL, nginx's ETag, validators and a schedule.
func benchPage(i int) storage.Page {
	now := time.Now()
	return storage.Page{ID: uint64(i)*0x9e3779b97f4a7c15 + 1, State: storage.PageState{
		URL:     fmt.Sprintf("https://www.postgresql.org/docs/17/functions-section-%07d.html", i),
		Fetched: now, Status: 200, ETag: fmt.Sprintf(`"65f1c2a8-%x"`, 10000+i%50000),
		LastModified: now.Add(-time.Hour), Digest: uint64(i) * 31, Due: now.Add(24 * time.Hour), Interval: 24 * time.Hour, Change: 1,
	}}
}

// BenchmarkInMemoryPagesSize reports the heap bytes a page state costs in
// the memory store (bytes/url), with 200,000 pages.
func BenchmarkInMemoryPagesSize(b *testing.B) {
	const n = 200_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := &storage.InMemoryStorage{}
		batch := make([]storage.Page, 0, 1000)
		for i := range n {
			batch = append(batch, benchPage(i))
			if len(batch) == cap(batch) {
				if err := s.PutPages(b.Context(), batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/url")
		runtime.KeepAlive(s)
	}
}
