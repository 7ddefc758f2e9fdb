package warc_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// linkSite serves two HTML pages with links (one gzipped and chunked, with
// a <base>) and a page without links.
func linkSite(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><link rel="stylesheet" href="style.css"></head><body>
<a href="/plain#top">plain</a> <a href="http://other.example/x">other</a> <img src="/logo.png">
<a href="mailto:shop@example.com">mail</a> <a href="/plain">again</a></body></html>`)
	})
	mux.HandleFunc("/gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, `<html><head><base href="/dir/"></head><body>`)
		_ = zw.Flush()
		w.(http.Flusher).Flush() // chunked
		fmt.Fprint(zw, `<a href="page">page</a></body></html>`)
		_ = zw.Close()
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>No links</title></head></html>`)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// crawlLinks archives "/", "/gz" and "/plain" of s into dir.
func crawlLinks(t *testing.T, s *httptest.Server, dir string, opts ...warc.Option) warc.Counts {
	t.Helper()
	w, err := warc.New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.IgnoreRobotsTxt())
	for _, p := range []string{"/", "/gz", "/plain"} {
		if err := c.Visit(s.URL + p); err != nil {
			t.Fatalf("Visit(%q) error = %v", p, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	return w.Counts()
}

func TestOutlinksMetadataRecords(t *testing.T) {
	s := linkSite(t)
	dir := t.TempDir()
	counts := crawlLinks(t, s, dir, warc.Outlinks())
	recs := readAll(t, dir)
	want := map[string]string{
		// In document order, each once: no fragment, no mailto:.
		s.URL + "/": "outlink: " + s.URL + "/style.css E link/@href\r\n" +
			"outlink: " + s.URL + "/plain L a/@href\r\n" +
			"outlink: http://other.example/x L a/@href\r\n" +
			"outlink: " + s.URL + "/logo.png E img/@src\r\n",
		s.URL + "/gz": "outlink: " + s.URL + "/dir/page L a/@href\r\n",
	}
	responses := make(map[string]string) // URI → record ID
	for _, r := range recs {
		if r.typ == "response" {
			responses[r.uri] = r.id
		}
	}
	n := 0
	for _, r := range recs {
		if r.typ != "metadata" {
			continue
		}
		n++
		links, ok := want[r.uri]
		if !ok {
			t.Errorf("metadata record for %s, which has no links", r.uri)
			continue
		}
		if string(r.block) != links {
			t.Errorf("metadata of %s:\n%q\nwant\n%q", r.uri, r.block, links)
		}
		if id := responses[r.uri]; id == "" || r.concurrentTo != id {
			t.Errorf("metadata of %s: WARC-Concurrent-To %q, want the response record %q", r.uri, r.concurrentTo, id)
		}
	}
	if n != len(want) || counts.Metadata != len(want) {
		t.Errorf("metadata records = %d (Counts %d), want %d", n, counts.Metadata, len(want))
	}

	// Without the option there are none.
	dir = t.TempDir()
	if counts := crawlLinks(t, s, dir); counts.Metadata != 0 {
		t.Errorf("Counts().Metadata = %d without Outlinks, want 0", counts.Metadata)
	}
	for _, r := range readAll(t, dir) {
		if r.typ == "metadata" {
			t.Errorf("metadata record for %s without Outlinks", r.uri)
		}
	}
}

// TestWarcioReadsOutlinks has Webrecorder's warcio read the metadata
// records: their digests check and it counts them.
func TestWarcioReadsOutlinks(t *testing.T) {
	tools := warcTools(t)
	s := linkSite(t)
	dir := t.TempDir()
	crawlLinks(t, s, dir, warc.Outlinks())
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v (%v), want 1", files, err)
	}
	var got struct {
		Counts map[string]int
		Bad    []string
	}
	out := node(t, tools, filepath.Join("testdata", "check.mjs"), files[0])
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("check.mjs printed %q: %v", out, err)
	}
	for _, b := range got.Bad {
		t.Error(b)
	}
	if got.Counts["metadata"] != 2 || got.Counts["response"] != 3 || got.Counts["request"] != 3 {
		t.Errorf("warcio counts %v, want 2 metadata, 3 response and 3 request records", got.Counts)
	}
}
