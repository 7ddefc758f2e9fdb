package magpie

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// reusePage is page n of reuseSite: its number in <h1> and in a marker
// repeated to a size that varies with n (1 to 40 KB), so that a buffer
// reused while another page still reads it shows up as the wrong number.
func reusePage(n, pages int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>p%d</title></head><body><h1>%d</h1>", n, n)
	for _, next := range []int{2*n + 1, 2*n + 2} {
		if next < pages {
			fmt.Fprintf(&b, `<a href="/p/%d">next</a>`, next)
		}
	}
	marker := fmt.Sprintf("<p>page %d</p>", n)
	for b.Len() < 1024*(1+n%40) {
		b.WriteString(marker)
	}
	b.WriteString("</body></html>")
	return b.String()
}

// reuseSite serves reusePage 0 to pages-1 at /p/N: every page once through
// the links of a binary tree. chunked pages have no Content-Length.
func reuseSite(t *testing.T, pages int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || n < 0 || n >= pages {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page := reusePage(n, pages)
		if n%3 == 0 {
			// Written in parts with no length: read into a buffer that grows.
			for part := range strings.SplitAfterSeq(page, "</p>") {
				io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		io.WriteString(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pageNumber is the N of a reuseSite URL.
func pageNumber(t *testing.T, r *Request) int {
	n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
	if err != nil {
		t.Errorf("unexpected URL %s", r.URL)
	}
	return n
}

// TestReuseBodyEachPageReadsItsOwn crawls 300 pages of different sizes, 16
// at a time, with ReuseBody, on the streamed and on the parsed path: every
// callback of a page, to OnScraped, sees that page's body and text, never a
// later page's, and once the crawl is over every Response kept past its
// callbacks has a nil Body (its buffer went back for reuse).
func TestReuseBodyEachPageReadsItsOwn(t *testing.T) {
	const pages = 300
	srv := reuseSite(t, pages)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("StreamHTML=%v", stream), func(t *testing.T) {
			opts := []CollectorOption{Async(true), ReuseBody(), Workers(16)}
			if stream {
				opts = append(opts, StreamHTML())
			}
			c := NewCollector(opts...)
			if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 16}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var kept []*Response
			check := func(where string, r *Response) {
				n := pageNumber(t, r.Request)
				if want := []byte(reusePage(n, pages)); !bytes.Equal(r.Body, want) {
					t.Errorf("%s of page %d: Body is %d bytes, want that page's %d (%.60q)", where, n, len(r.Body), len(want), r.Body)
				}
			}
			c.OnResponse(func(r *Response) {
				check("OnResponse", r)
				mu.Lock()
				kept = append(kept, r)
				mu.Unlock()
			})
			c.OnHTML("h1", func(e *HTMLElement) {
				if got, want := e.Text, strconv.Itoa(pageNumber(t, e.Request)); got != want {
					t.Errorf("OnHTML h1 of page %s = %q", want, got)
				}
				check("OnHTML", e.Response)
			})
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			c.OnScraped(func(r *Response) { check("OnScraped", r) })
			c.OnError(func(r *Response, err error) { t.Errorf("%s: %v", r.Request.URL, err) })
			if err := c.Visit(srv.URL + "/p/0"); err != nil {
				t.Fatal(err)
			}
			c.Wait()
			if len(kept) != pages {
				t.Fatalf("%d pages crawled, want %d", len(kept), pages)
			}
			for _, r := range kept {
				if r.Body != nil || r.RawBody() != nil {
					t.Fatalf("page %s kept past its callbacks: Body %d bytes, want nil (its buffer is reused)", r.Request.URL, len(r.Body))
				}
			}
		})
	}
}

// TestReuseBodyItemsReadTheBody: a page that emitted items keeps its body
// until they have passed the pipelines (an item holding Response.Body
// itself holds that page's bytes there, 8 pages at once), and only then is
// its buffer taken back.
func TestReuseBodyItemsReadTheBody(t *testing.T) {
	const pages = 120
	srv := reuseSite(t, pages)
	c := NewCollector(Async(true), ReuseBody(), Workers(8))
	type bodyItem struct {
		resp *Response
		body []byte
	}
	var mu sync.Mutex
	var kept []*Response
	c.Pipeline(func(_ context.Context, it *Item) error {
		v := it.Value.(bodyItem)
		n := pageNumber(t, v.resp.Request)
		if want := reusePage(n, pages); string(v.body) != want || string(v.resp.Body) != want {
			t.Errorf("pipeline: item of page %d holds %d bytes (%.60q), Body %d bytes; want that page's %d", n, len(v.body), v.body, len(v.resp.Body), len(want))
		}
		mu.Lock()
		kept = append(kept, v.resp)
		mu.Unlock()
		return nil
	})
	c.OnResponse(func(r *Response) { r.Emit(bodyItem{r, r.Body}) })
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(srv.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if len(kept) != pages {
		t.Fatalf("%d items, want %d", len(kept), pages)
	}
	for _, r := range kept {
		if r.Body != nil {
			t.Fatalf("page %s: Body %d bytes once its item passed, want nil (its buffer is reused)", r.Request.URL, len(r.Body))
		}
	}
}

// TestReuseBodyConvertedCharset: a windows-1252 page with ReuseBody gives
// its callbacks the UTF-8 Body and the bytes as received in RawBody, as
// without the option, and neither once the page is done.
func TestReuseBodyConvertedCharset(t *testing.T) {
	raw := []byte("<html><head><title>caf\xe9</title></head><body><h1>na\xefve</h1></body></html>")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=windows-1252")
		w.Write(raw)
	}))
	defer srv.Close()
	c := NewCollector(ReuseBody())
	var title string
	var gotRaw, gotBody []byte
	var kept *Response
	c.OnResponse(func(r *Response) { gotRaw, gotBody, kept = bytes.Clone(r.RawBody()), bytes.Clone(r.Body), r })
	c.OnHTML("title", func(e *HTMLElement) { title = e.Text })
	if err := c.Visit(srv.URL); err != nil {
		t.Fatal(err)
	}
	if title != "café" {
		t.Errorf("title = %q, want %q", title, "café")
	}
	if !bytes.Equal(gotRaw, raw) {
		t.Errorf("RawBody = %q, want the bytes as received %q", gotRaw, raw)
	}
	if !bytes.Contains(gotBody, []byte("naïve")) {
		t.Errorf("Body = %q, want it converted to UTF-8", gotBody)
	}
	if kept.Body != nil || kept.RawBody() != nil {
		t.Errorf("kept Response: Body %d bytes, RawBody %d bytes once done; want both nil", len(kept.Body), len(kept.RawBody()))
	}
}

// TestReuseBodyAllocatesLess: 200 pages of 64 KB, read one after another,
// allocate at least three quarters of a body less per page with ReuseBody
// than without (the read itself is the body's size each time without it,
// when no collection has left a dead body to recycle: recycling is off
// here, since when collections run is up to the runtime).
func TestReuseBodyAllocatesLess(t *testing.T) {
	if !allocsCounted(t) {
		return
	}
	noRecycle.Store(true)
	defer noRecycle.Store(false)
	page := "<html><body>" + strings.Repeat("<p>sixty-four kilobytes</p>", 64<<10/27) + "</body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	defer srv.Close()
	const pages = 200
	perPage := func(opts ...CollectorOption) float64 {
		c := NewCollector(append(opts, AllowURLRevisit())...)
		c.OnResponse(func(*Response) {})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range pages {
			if err := c.Visit(fmt.Sprintf("%s/%d", srv.URL, i)); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / pages
	}
	plain, reused := perPage(), perPage(ReuseBody())
	t.Logf("bytes allocated per 64 KB page: %.0f without ReuseBody, %.0f with", plain, reused)
	if saved := plain - reused; saved < 0.75*float64(len(page)) {
		t.Errorf("ReuseBody saves %.0f bytes a page, want at least 3/4 of the %d-byte body", saved, len(page))
	}
}

// TestReadBodyIntoReusedBuffer: readBodyInto reads into the buffer it is
// given, grows it for a body larger than it, leaves the grown one in place
// for the next page, and cuts a body at the limit as readBody does.
func TestReadBodyIntoReusedBuffer(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 10_000)
	buf := make([]byte, 0, 1024)
	for _, tt := range []struct {
		name          string
		body          []byte
		header        http.Header
		max           int64
		want          []byte
		wantTruncated bool
	}{
		{"small, known length", big[:500], http.Header{"Content-Length": {"500"}}, 0, big[:500], false},
		{"larger than the buffer, unknown length", big, http.Header{}, 0, big, false},
		{"cut at the limit", big, http.Header{}, 4000, big[:4000], true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated, err := readBodyInto(bytes.NewReader(tt.body), tt.header, "/", tt.max, &buf)
			if err != nil || truncated != tt.wantTruncated || !bytes.Equal(got, tt.want) {
				t.Fatalf("readBodyInto() = %d bytes, truncated %v, err %v; want %d bytes, truncated %v", len(got), truncated, err, len(tt.want), tt.wantTruncated)
			}
			if !sharesBuffer(got, buf) || len(buf) != 0 {
				t.Errorf("the body is not read into the reused buffer (len %d, cap %d), or the buffer is not left empty for the next page", len(buf), cap(buf))
			}
		})
	}
	if cap(buf) < len(big) {
		t.Errorf("buffer cap = %d after a %d-byte body, want the grown buffer kept", cap(buf), len(big))
	}
}

// sharesBuffer reports whether b is a part of buf's backing array (b's
// capacity may end before buf's).
func sharesBuffer(b, buf []byte) bool {
	if cap(b) == 0 || cap(buf) == 0 {
		return false
	}
	full := buf[:cap(buf)]
	first := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(full)))
	return first >= lo && first+uintptr(cap(b)) <= lo+uintptr(cap(full))
}

// TestReuseBodyShowsNoEarlierPage: with ReuseBody the page's buffer held
// earlier, larger pages; nothing of them shows past len(Body) up to
// cap(Body), in Body or RawBody, as in the default mode.
func TestReuseBodyShowsNoEarlierPage(t *testing.T) {
	const pages = 60
	srv := reuseSite(t, pages)
	c := NewCollector(Async(true), ReuseBody(), Workers(2))
	var mu sync.Mutex
	crawled, stale := 0, 0
	c.OnResponse(func(r *Response) {
		mu.Lock()
		defer mu.Unlock()
		crawled++
		for _, b := range [][]byte{r.Body, r.RawBody()} {
			if tail := b[len(b):cap(b)]; bytes.Contains(tail, []byte("<p>page ")) {
				stale++
				return
			}
		}
	})
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnError(func(r *Response, err error) { t.Errorf("%s: %v", r.Request.URL, err) })
	if err := c.Visit(srv.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if crawled != pages || stale != 0 {
		t.Errorf("%d of %d pages show an earlier page past len(Body), want 0 of %d", stale, crawled, pages)
	}
}
