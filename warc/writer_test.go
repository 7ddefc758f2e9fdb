package warc_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// crawl archives a crawl of s into dir and returns the Writer's counts.
func crawl(t *testing.T, s *site, dir string, opts ...warc.Option) warc.Counts {
	t.Helper()
	w, err := warc.New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.MaxBodySize(bodyLimit), magpie.Async())
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if err := w.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	return w.Counts()
}

func TestWriterArchivesEveryExchange(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	counts := crawl(t, s, dir)
	recs := readAll(t, dir)

	// One request record per request the server answered: pages, the
	// redirect hop, the 404, the 304 and robots.txt.
	n := 0
	for _, r := range recs {
		if r.typ == "request" {
			n++
		}
	}
	if want := s.requests(); n != want || counts.Request != want {
		t.Errorf("request records = %d (Counts %d), server answered %d", n, counts.Request, want)
	}
	ids := make(map[string]record)
	for _, r := range recs {
		ids[r.id] = r
	}
	for _, r := range recs {
		if r.typ != "request" {
			continue
		}
		resp, ok := ids[r.concurrentTo]
		if !ok || resp.uri != r.uri || (resp.typ != "response" && resp.typ != "revisit") {
			t.Errorf("request record of %s: WARC-Concurrent-To %q is not its response", r.uri, r.concurrentTo)
		}
		if r.ip != "127.0.0.1" {
			t.Errorf("request record of %s: WARC-IP-Address %q", r.uri, r.ip)
		}
	}
	for _, path := range []string{"/robots.txt", "/", "/moved", "/target", "/missing", "/gz", "/chunked", "/big"} {
		if got := len(byURI(recs, "response", path)) + len(byURI(recs, "revisit", path)); got != 1 {
			t.Errorf("records of %s = %d, want 1", path, got)
		}
	}
	if r := byURI(recs, "response", "/moved"); len(r) == 1 && !bytes.HasPrefix(r[0].block, []byte("HTTP/1.1 302 Found\r\n")) {
		t.Errorf("redirect record starts %q", r[0].block[:min(40, len(r[0].block))])
	}
	if r := byURI(recs, "response", "/missing"); len(r) == 1 && !bytes.HasPrefix(r[0].block, []byte("HTTP/1.1 404 ")) {
		t.Errorf("404 record starts %q", r[0].block[:min(40, len(r[0].block))])
	}

	// The gzip body is archived as it came, not decoded.
	if r := byURI(recs, "response", "/gz"); len(r) == 1 {
		_, body, _ := bytes.Cut(r[0].block, []byte("\r\n\r\n"))
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gz record body is not gzip: %v", err)
		}
		page, _ := io.ReadAll(zr)
		if !strings.Contains(string(page), "<title>Zipped</title>") {
			t.Errorf("gz record decodes to %q", page)
		}
	}
	// The chunked body keeps its framing.
	if r := byURI(recs, "response", "/chunked"); len(r) == 1 {
		if !bytes.Contains(r[0].block, []byte("Transfer-Encoding: chunked\r\n")) || !bytes.HasSuffix(r[0].block, []byte("\r\n0\r\n\r\n")) {
			t.Errorf("chunked record lost its framing: %q", r[0].block)
		}
	}
	// The body cut at MaxBodySize is marked, and holds at least the limit.
	if r := byURI(recs, "response", "/big"); len(r) == 1 {
		if r[0].truncated != "length" || len(r[0].block) < bodyLimit || len(r[0].block) >= bigSize {
			t.Errorf("big record: WARC-Truncated %q, %d bytes", r[0].truncated, len(r[0].block))
		}
	}
	// Identical bodies: the second is a revisit of the first.
	a, b := byURI(recs, "response", "/a"), byURI(recs, "response", "/b")
	ra, rb := byURI(recs, "revisit", "/a"), byURI(recs, "revisit", "/b")
	if len(a)+len(b) != 1 || len(ra)+len(rb) != 1 {
		t.Fatalf("/a and /b: %d+%d responses, %d+%d revisits; want one of each", len(a), len(b), len(ra), len(rb))
	}
	first, rev := append(a, b...)[0], append(ra, rb...)[0]
	if !strings.HasSuffix(rev.profile, "/identical-payload-digest") || rev.refersTo != first.id || rev.payloadDigest != first.payloadDigest {
		t.Errorf("revisit: profile %q refers to %q (first %q), digest %q (first %q)", rev.profile, rev.refersTo, first.id, rev.payloadDigest, first.payloadDigest)
	}
	if bytes.Contains(rev.block, []byte(samePage)) {
		t.Error("the revisit record stores the body again")
	}
	// The 304 is a revisit, server-not-modified.
	if r := byURI(recs, "revisit", "/nm"); len(r) != 1 || !strings.HasSuffix(r[0].profile, "/server-not-modified") {
		t.Errorf("304: revisit records %+v", r)
	}

	// The index lists every response and revisit record.
	idx, err := filepath.Glob(filepath.Join(dir, "*.cdxj"))
	if err != nil || len(idx) != 1 {
		t.Fatalf("indexes %v (%v)", idx, err)
	}
	data, err := os.ReadFile(idx[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if want := counts.Response + counts.Revisit; len(lines) != want {
		t.Errorf("index lines = %d, want %d", len(lines), want)
	}
	if !strings.HasPrefix(lines[0], "1,0,0,127:") {
		t.Errorf("index line %q: key is not a SURT", lines[0])
	}
}
