package magpie

import (
	"context"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestStopEndsBodyReadOfOwnTransport: with net/http's own transport, the
// download stage registers nothing to close a body when the crawl stops
// (the transport ends the read with the request's context). Stop must
// still return while a server holds a body half sent, with no request
// timeout to fall back on.
func TestStopEndsBodyReadOfOwnTransport(t *testing.T) {
	reading := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write([]byte("<html><body>"))
		w.(http.Flusher).Flush()
		select {
		case reading <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	c := NewCollector(IgnoreRobotsTxt(), Async())
	c.SetRequestTimeout(0)
	errs := make(chan error, 1)
	c.OnError(func(_ *Response, err error) { errs <- err })
	stopWhileReading(t, c, srv.URL+"/", reading)
	if got := c.Stats().Responses; got != 0 {
		t.Errorf("Stats().Responses = %d after a body cut short by Stop, want 0", got)
	}
}

// TestStopClosesBodyOfRegisteredProtocol: a protocol registered on
// net/http's transport (RegisterProtocol) answers with bodies of its own,
// which may ignore the request's context: the download stage still closes
// them when the crawl stops.
func TestStopClosesBodyOfRegisteredProtocol(t *testing.T) {
	tr := NewTransport()
	stuck := blockingBodyTransport{reading: make(chan struct{}, 1)}
	tr.RegisterProtocol("stuck", stuck)
	c := NewCollector(IgnoreRobotsTxt(), Async())
	c.SetRequestTimeout(0)
	c.WithTransport(tr)
	stopWhileReading(t, c, "stuck://host.test/", stuck.reading)
}

// TestSendHeaderIsACopy: the header a request is sent with is a copy of
// Request.Headers (nil values kept, as Header.Clone keeps them), and the
// values roundTrip adds in its spare room overwrite none of the copied ones.
func TestSendHeaderIsACopy(t *testing.T) {
	h := http.Header{"Accept": {"a/b", "c/d"}, "X-One": {"1"}, "User-Agent": nil}
	out, spare := sendHeader(h)
	if !maps.EqualFunc(out, h, slices.Equal) {
		t.Fatalf("sendHeader = %v, want %v", out, h)
	}
	if v, ok := out["User-Agent"]; !ok || v != nil {
		t.Errorf("User-Agent = %#v (present %v), want a nil value kept", v, ok)
	}
	if cap(spare) < 2 {
		t.Fatalf("spare room for %d values, want 2", cap(spare))
	}
	spare = append(spare, "gzip")
	out["Accept-Encoding"] = spare[len(spare)-1 : len(spare) : len(spare)]
	spare = append(spare, "zstd")
	out["X-Two"] = spare[len(spare)-1 : len(spare) : len(spare)]
	out["X-One"] = append(out["X-One"], "2")
	// Adding to a value must not write into its neighbour in the array.
	out["Accept-Encoding"] = append(out["Accept-Encoding"], "br")
	out["Accept"][0] = "changed"
	if got := h["Accept"]; !slices.Equal(got, []string{"a/b", "c/d"}) {
		t.Errorf("source Accept = %v after the copy changed, want it untouched", got)
	}
	if got := h["X-One"]; !slices.Equal(got, []string{"1"}) {
		t.Errorf("source X-One = %v, want [1]", got)
	}
	if _, ok := h["Accept-Encoding"]; ok {
		t.Error("source gained Accept-Encoding")
	}
	for k, want := range map[string][]string{
		"Accept": {"changed", "c/d"}, "X-One": {"1", "2"}, "Accept-Encoding": {"gzip", "br"}, "X-Two": {"zstd"},
	} {
		if got := out[k]; !slices.Equal(got, want) {
			t.Errorf("copy %s = %v, want %v", k, got, want)
		}
	}
	// The map, its table and the values, the two added values included:
	// Clone and two Sets make five.
	if n := testing.AllocsPerRun(100, func() {
		out, spare := sendHeader(h)
		spare = append(spare, "a", "b")
		out["Accept-Encoding"], out["X-Two"] = spare[0:1:1], spare[1:2:2]
	}); n > 3 {
		t.Errorf("sendHeader and two added values allocate %v times, want at most 3", n)
	}
}

// TestRequestHeadersNotChangedBySend: what roundTrip adds (User-Agent,
// Accept-Encoding) and the jar's cookies reach the server, never the
// Request's own Headers, which OnResponse still sees as they were.
func TestRequestHeadersNotChangedBySend(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "1"})
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<p>x</p>"))
	}))
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt(), AllowURLRevisit())
	c.UserAgent = "cost-test/1"
	var seen http.Header
	c.OnRequest(func(r *Request) { r.Headers.Set("X-Mine", "v") })
	c.OnResponse(func(r *Response) { seen = r.Request.Headers.Clone() })
	for range 2 {
		if err := c.Visit(srv.URL + "/"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
	}
	<-got
	sent := <-got // the second request carries the cookie
	for k, want := range map[string]string{"User-Agent": "cost-test/1", "X-Mine": "v", "Cookie": "s=1", "Accept": "*/*"} {
		if v := sent.Get(k); v != want {
			t.Errorf("sent %s = %q, want %q", k, v, want)
		}
	}
	if sent.Get("Accept-Encoding") == "" {
		t.Error("no Accept-Encoding sent")
	}
	for _, k := range []string{"User-Agent", "Accept-Encoding", "Cookie"} {
		if _, ok := seen[k]; ok {
			t.Errorf("Request.Headers gained %s: %v", k, seen)
		}
	}
}

// TestSendContextValues: the outgoing request's context answers the keys a
// ProxyFunc and a Colly-style redirect handler read, and passes any other
// key on to the context it was made from.
func TestSendContextValues(t *testing.T) {
	type other struct{}
	base := context.WithValue(t.Context(), other{}, "kept")
	sc := &sendContext{Context: base, checkRevisit: true}
	box, ok := sc.Value(ProxyURLKey).(*string)
	if !ok || box == nil {
		t.Fatalf("Value(ProxyURLKey) = %#v, want a *string box", sc.Value(ProxyURLKey))
	}
	*box = "http://user:secret@proxy.test:3128"
	if got := proxyURLFromContext(sc); got != "http://user:xxxxx@proxy.test:3128" {
		t.Errorf("proxyURLFromContext = %q, want the reported proxy, redacted", got)
	}
	if v, _ := sc.Value(CheckRevisitKey).(bool); !v {
		t.Errorf("Value(CheckRevisitKey) = %v, want true", sc.Value(CheckRevisitKey))
	}
	if st, _ := sc.Value(fetchStateKey{}).(*fetchState); st != &sc.st {
		t.Error("Value(fetchStateKey) is not the context's fetch state")
	}
	if v := sc.Value(other{}); v != "kept" {
		t.Errorf("Value(other key) = %v, want the parent's value", v)
	}
}

// FuzzSimpleContentType: where the quick Content-Type reading applies, it
// gives the media type and charset mime.ParseMediaType gives.
func FuzzSimpleContentType(f *testing.F) {
	for _, s := range []string{
		"text/html", "text/html; charset=utf-8", "TEXT/HTML;CHARSET=UTF-8", "text/html;charset=\"utf-8\"",
		"text/html; charset= utf-8", "text/html;", "text/html; q=1", "text", "text/", "/html",
		"text/html; charset=utf-8; q=1", "application/xhtml+xml; charset=ISO-8859-1", "text/ht(ml", " text/plain ",
		"text/html; Charset=windows-1252", "image/png; charset=utf-8", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		mt, cs, ok := simpleContentType(v)
		if !ok {
			return
		}
		wantMT, params, err := mime.ParseMediaType(v)
		if err != nil {
			t.Fatalf("simpleContentType(%q) = %q, %q; ParseMediaType fails: %v", v, mt, cs, err)
		}
		if mt != wantMT || cs != params["charset"] || len(params) > 1 || (cs == "" && len(params) != 0) {
			t.Fatalf("simpleContentType(%q) = %q, %q; ParseMediaType = %q, %v", v, mt, cs, wantMT, params)
		}
	})
}

// TestToUTF8QuickContentType: the usual "text/html; charset=utf-8" is read
// without allocating, and gives what the full path gives.
func TestToUTF8QuickContentType(t *testing.T) {
	body := []byte("<p>caf\xc3\xa9 \xff</p>")
	for _, ct := range []string{"text/html; charset=utf-8", "text/html; charset=UTF8", "text/html;charset=\"utf-8\""} {
		got, err := toUTF8(body, ct, "", false)
		if err != nil || string(got) != "<p>café \uFFFD</p>" {
			t.Errorf("toUTF8(%q) = %q, %v; want the invalid byte replaced", ct, got, err)
		}
	}
	valid := []byte("<p>café</p>")
	if n := testing.AllocsPerRun(100, func() { _, _ = toUTF8(valid, "text/html; charset=utf-8", "", false) }); n != 0 {
		t.Errorf("toUTF8 of a UTF-8 page allocates %v times, want 0", n)
	}
	if got, _ := toUTF8([]byte("caf\xe9"), "text/plain; charset=windows-1252", "", false); string(got) != "café" {
		t.Errorf("toUTF8(windows-1252) = %q, want café", got)
	}
}

// BenchmarkFetchPage is one sync Visit of a 16 KiB UTF-8 page without
// links, the server in the same process (its allocations count too): the
// download stage's cost per page with the fewest other stages around it.
func BenchmarkFetchPage(b *testing.B) {
	page := []byte("<!doctype html><title>t</title><p>" + strings.Repeat("lorem ipsum ", 16<<10/12) + "</p>")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	}))
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt(), AllowURLRevisit())
	var n int
	c.OnResponse(func(r *Response) { n += len(r.Body) })
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Visit(srv.URL + "/"); err != nil {
			b.Fatal(err)
		}
	}
	if n != b.N*len(page) {
		b.Fatalf("read %d body bytes in %d visits, want %d each", n, b.N, len(page))
	}
}
