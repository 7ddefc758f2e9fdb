package warc_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// The page the chunked tests serve, in two writes.
const (
	partOne = "<html>part one"
	partTwo = " part two</html>"
)

// twoPartSite serves partOne+partTwo chunked (written, flushed, written:
// no Content-Length) at /chunked and with a Content-Length at /whole, and
// gzip bytes chunked at /gz.
func twoPartSite(t *testing.T, zipped []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/chunked":
			fmt.Fprint(w, partOne)
			w.(http.Flusher).Flush()
			fmt.Fprint(w, partTwo)
		case "/whole":
			w.Header().Set("Content-Length", fmt.Sprint(len(partOne+partTwo)))
			fmt.Fprint(w, partOne+partTwo)
		case "/gz":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped[:len(zipped)/2])
			w.(http.Flusher).Flush()
			_, _ = w.Write(zipped[len(zipped)/2:])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestChunkedPayloadDigest checks that a chunked response's
// WARC-Payload-Digest, and its CDXJ digest, are the SHA-1 of the body with
// the chunked framing taken off (a gzip body's stay those of the gzip
// bytes), as warcio reads them; and that the same body sent with a
// Content-Length is then an identical-payload revisit of it.
func TestChunkedPayloadDigest(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	fmt.Fprint(zw, "<html><title>Zipped and chunked</title></html>")
	_ = zw.Close()
	srv := twoPartSite(t, zipped.Bytes())
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.IgnoreRobotsTxt())
	for _, p := range []string{"/chunked", "/whole", "/gz"} {
		if err := c.Visit(srv.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	body := sha1Base32([]byte(partOne + partTwo))
	gz := sha1Base32(zipped.Bytes())
	recs := readAll(t, dir) // also recomputes every payload digest
	ch := byURI(recs, "response", "/chunked")
	if len(ch) != 1 {
		t.Fatalf("response records of /chunked: %d, want 1", len(ch))
	}
	if !bytes.Contains(ch[0].block, []byte("Transfer-Encoding: chunked\r\n")) {
		t.Fatalf("/chunked was not sent chunked: %q", ch[0].block)
	}
	if ch[0].payloadDigest != body {
		t.Errorf("/chunked: WARC-Payload-Digest %s, want %s (sha1 of the body without its framing)", ch[0].payloadDigest, body)
	}
	rev := byURI(recs, "revisit", "/whole")
	if len(rev) != 1 || rev[0].refersTo != ch[0].id || rev[0].payloadDigest != body {
		t.Errorf("/whole: revisit records %+v, want one referring to %s with digest %s", rev, ch[0].id, body)
	}
	if r := byURI(recs, "response", "/gz"); len(r) != 1 {
		t.Errorf("/gz: %d response records, want 1", len(r))
	} else if r[0].payloadDigest != gz {
		t.Errorf("/gz: WARC-Payload-Digest %s, want %s (sha1 of the gzip bytes)", r[0].payloadDigest, gz)
	}

	// The Writer's index and warcio's agree, and carry the same digests.
	tools := warcTools(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("files %v, want 1", files)
	}
	var checked struct{ Bad []string }
	out := node(t, tools, filepath.Join("testdata", "check.mjs"), files[0])
	if err := json.Unmarshal(out, &checked); err != nil {
		t.Fatalf("check.mjs printed %q: %v", out, err)
	}
	for _, b := range checked.Bad {
		t.Error("warcio:", b)
	}
	cli := filepath.Join(tools, "node_modules", "warcio", "dist", "cli.js")
	theirs := cdxKeys(t, string(node(t, tools, cli, "cdx-index", files[0])))
	data, err := os.ReadFile(strings.TrimSuffix(files[0], ".warc.gz") + ".cdxj")
	if err != nil {
		t.Fatal(err)
	}
	ours := cdxKeys(t, string(data))
	if strings.Join(theirs, "\n") != strings.Join(ours, "\n") {
		t.Errorf("warcio indexes\n%v\nthe Writer's index has\n%v", theirs, ours)
	}
	want := map[string]string{"/chunked": body, "/whole": body, "/gz": gz}
	for _, k := range theirs {
		f := strings.Fields(k) // urlkey url offset length status digest
		for p, d := range want {
			if strings.HasSuffix(f[1], p) {
				if "sha1:"+f[5] != d {
					t.Errorf("warcio's index of %s: digest %s, want %s", p, f[5], d)
				}
				delete(want, p)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("warcio did not index %v", want)
	}
}
