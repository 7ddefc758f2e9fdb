package warc_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/warc"
)

// etagSite serves /page (chunked, so that its payload digest is the
// de-chunked body's) with an ETag, and answers 304 to a request that names
// it; it counts the 304s.
func etagSite(t *testing.T) (*httptest.Server, func() int) {
	t.Helper()
	var (
		mu  sync.Mutex
		nms int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/page" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			mu.Lock()
			nms++
			mu.Unlock()
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, partOne)
		w.(http.Flusher).Flush()
		fmt.Fprint(w, partTwo)
	}))
	t.Cleanup(srv.Close)
	return srv, func() int {
		mu.Lock()
		defer mu.Unlock()
		return nms
	}
}

// TestNotModifiedRevisitNamesTheOriginal recrawls a page, first with the
// same Writer that holds its 200, then with another Writer (an earlier
// run's archive): each 304 is a server-not-modified revisit record that
// names the 200's record (WARC-Refers-To, WARC-Refers-To-Target-URI,
// WARC-Refers-To-Date) and carries its payload digest, in the record and
// in the index, as warcio reads them.
func TestNotModifiedRevisitNamesTheOriginal(t *testing.T) {
	srv, notModified := etagSite(t)
	store := &storage.InMemoryStorage{}
	crawl := func(w *warc.Writer) {
		t.Helper()
		c := magpie.NewCollector(w.Option(), magpie.Recrawl(magpie.RecrawlPolicy{}))
		if err := c.SetStorage(store); err != nil {
			t.Fatal(err)
		}
		if err := c.Visit(srv.URL + "/page"); err != nil {
			t.Fatal(err)
		}
	}
	first, second := t.TempDir(), t.TempDir()
	w, err := warc.New(first)
	if err != nil {
		t.Fatal(err)
	}
	crawl(w) // the 200
	crawl(w) // a 304, the 200 in the same Writer
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, err := warc.New(second)
	if err != nil {
		t.Fatal(err)
	}
	crawl(w2) // a 304, the 200 in an earlier Writer's file
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := notModified(); n != 2 {
		t.Fatalf("the server answered %d 304s, want 2", n)
	}

	orig := byURI(readAll(t, first), "response", srv.URL+"/page")
	if len(orig) != 1 {
		t.Fatalf("%d response records of /page, want 1", len(orig))
	}
	body := sha1Base32([]byte(partOne + partTwo))
	if orig[0].payloadDigest != body {
		t.Fatalf("the 200's payload digest %s, want %s", orig[0].payloadDigest, body)
	}
	revs := append(byURI(readAll(t, first), "revisit", srv.URL+"/page"), byURI(readAll(t, second), "revisit", srv.URL+"/page")...)
	if len(revs) != 2 {
		t.Fatalf("%d revisit records of /page, want 2 (one per 304)", len(revs))
	}
	for i, r := range revs {
		if !strings.HasSuffix(r.profile, "/server-not-modified") || r.refersTo != orig[0].id || r.refersToURI != orig[0].uri ||
			r.refersToDate != orig[0].date || r.payloadDigest != body {
			t.Errorf("revisit %d: profile %q, refers to %q %q %q, digest %q; want the 200's: %q %q %q, %q",
				i, r.profile, r.refersTo, r.refersToURI, r.refersToDate, r.payloadDigest, orig[0].id, orig[0].uri, orig[0].date, body)
		}
	}

	// warcio reads both files, and indexes the revisits with the 200's
	// digest, as the Writer does.
	tools := warcTools(t)
	cli := filepath.Join(tools, "node_modules", "warcio", "dist", "cli.js")
	for _, dir := range []string{first, second} {
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
		theirs := cdxKeys(t, string(node(t, tools, cli, "cdx-index", files[0])))
		data, err := os.ReadFile(strings.TrimSuffix(files[0], ".warc.gz") + ".cdxj")
		if err != nil {
			t.Fatal(err)
		}
		if ours := cdxKeys(t, string(data)); strings.Join(theirs, "\n") != strings.Join(ours, "\n") {
			t.Errorf("warcio indexes\n%s\nthe Writer's index has\n%s", strings.Join(theirs, "\n"), strings.Join(ours, "\n"))
		}
		for _, k := range theirs {
			if f := strings.Fields(k); f[1] == srv.URL+"/page" && "sha1:"+f[len(f)-1] != body {
				t.Errorf("warcio's index line %q: digest is not the page's %s", k, body)
			}
		}
	}
}

// TestNotModifiedWithoutOriginal checks that a 304 whose original no
// recrawl state names (a server answering 304 to a plain request) is a
// revisit record without a payload digest, rather than one claiming the
// digest of an empty body.
func TestNotModifiedWithoutOriginal(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.IgnoreRobotsTxt())
	_ = c.Visit(s.URL + "/nm")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := byURI(readAll(t, dir), "revisit", "/nm")
	if len(r) != 1 {
		t.Fatalf("%d revisit records of /nm, want 1", len(r))
	}
	if r[0].payloadDigest != "" || r[0].refersTo != "" {
		t.Errorf("304 revisit: WARC-Payload-Digest %q, WARC-Refers-To %q; want neither", r[0].payloadDigest, r[0].refersTo)
	}
}
