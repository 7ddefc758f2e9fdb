package warc_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// TestKilledCrawlIsRecovered leaves a file open as a killed crawl does, with
// half a record at its end: no reader sees it as a WARC file, and New cuts
// the half record, renames the file, indexes what it kept, and writes the
// next run into a new file.
func TestKilledCrawlIsRecovered(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option())
	for _, p := range []string{"/a", "/target", "/missing"} {
		if err := c.Visit(s.URL + p); err != nil && !strings.Contains(p, "missing") {
			t.Fatal(err)
		}
	}
	// The Writer is not closed: the crawl was killed.
	if closed, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz")); len(closed) != 0 {
		t.Fatalf("files a reader would open while the crawl runs: %v", closed)
	}
	open, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz.open"))
	if len(open) != 1 {
		t.Fatalf("open files %v, want 1", open)
	}
	// Beside it, the index lines of its records, unsorted (README: a
	// killed Writer leaves name.cdxj.open too).
	openIdx := strings.TrimSuffix(open[0], ".warc.gz.open") + ".cdxj.open"
	if lines, err := os.ReadFile(openIdx); err != nil || strings.Count(string(lines), "\n") != 4 {
		t.Fatalf("%s: %d lines (%v), want the 4 of the records written", filepath.Base(openIdx), strings.Count(string(lines), "\n"), err)
	}
	if idx, _ := filepath.Glob(filepath.Join(dir, "*.cdxj")); len(idx) != 0 {
		t.Fatalf("indexes a reader would open while the crawl runs: %v", idx)
	}
	whole, err := os.ReadFile(open[0])
	if err != nil {
		t.Fatal(err)
	}
	// Half a record, as a write cut by the kill leaves.
	f, err := os.OpenFile(open[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(whole[len(whole)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	w2, err := warc.New(dir)
	if err != nil {
		t.Fatalf("New after a kill = %v", err)
	}
	recovered := strings.TrimSuffix(open[0], ".open")
	got, err := os.ReadFile(recovered)
	if err != nil {
		t.Fatalf("the open file was not recovered: %v", err)
	}
	if len(got) != len(whole) {
		t.Errorf("recovered file has %d bytes, want the %d of its whole records", len(got), len(whole))
	}
	recs := readAll(t, dir)
	// robots.txt, /a, /target, /missing: four exchanges and the warcinfo.
	if len(recs) != 9 {
		t.Errorf("recovered %d records, want 9", len(recs))
	}
	idx, err := os.ReadFile(strings.TrimSuffix(recovered, ".warc.gz") + ".cdxj")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(idx), "\n"); n != 4 {
		t.Errorf("recovered index has %d lines, want 4:\n%s", n, idx)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(left) != 0 {
		t.Errorf("left open after recovery: %v", left)
	}

	// The next run writes a new file with the next serial number.
	c2 := magpie.NewCollector(w2.Option(), magpie.IgnoreRobotsTxt())
	if err := c2.Visit(s.URL + "/chunked"); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 2 || !strings.HasSuffix(files[1], "-00002.warc.gz") {
		t.Errorf("files after the second run: %v", files)
	}
}

// TestHTTPSIsArchivedInPlaintext checks that an HTTPS exchange is archived
// as the HTTP inside TLS, with an https target URI, through a transport of
// the user's (its TLS settings kept).
func TestHTTPSIsArchivedInPlaintext(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>Secret</title></head></html>")
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	c.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})
	w.Option()(c)
	if err := c.Visit(srv.URL + "/page"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, dir)
	resp := byURI(recs, "response", "/page")
	if len(resp) != 1 || !strings.HasPrefix(resp[0].uri, "https://") {
		t.Fatalf("response records %+v", resp)
	}
	if !strings.HasPrefix(string(resp[0].block), "HTTP/1.1 200 OK\r\n") || !strings.Contains(string(resp[0].block), "<title>Secret</title>") {
		t.Errorf("the HTTPS response is not archived in plaintext: %q", resp[0].block)
	}
	req := byURI(recs, "request", "/page")
	if len(req) != 1 || !strings.HasPrefix(string(req[0].block), "GET /page HTTP/1.1\r\n") {
		t.Errorf("request records %+v", req)
	}
}

// TestGuardStaysWithArchiving checks that DenyPrivateNetworks still refuses
// a loopback address when every connection is recorded.
func TestGuardStaysWithArchiving(t *testing.T) {
	s := newSite(t)
	w, err := warc.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, opts := range map[string][]magpie.CollectorOption{
		"guard first":     {magpie.DenyPrivateNetworks(), w.Option()},
		"archiving first": {w.Option(), magpie.DenyPrivateNetworks()},
	} {
		c := magpie.NewCollector(append(opts, magpie.IgnoreRobotsTxt())...)
		if err := c.Visit(s.URL + "/a"); err == nil {
			t.Errorf("%s: Visit(loopback) error = nil, want a refusal", name)
		}
	}
	if n := s.requests(); n != 0 {
		t.Errorf("the server saw %d requests", n)
	}
}

// TestKilledWhileIndexing checks that a crawl killed after a file was
// closed but before its index was sorted gets its index from the next New,
// and that the runs of the interrupted sort are cleaned up.
func TestKilledWhileIndexing(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	w, err := warc.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.IgnoreRobotsTxt())
	for _, p := range []string{"/a", "/target", "/chunked"} {
		if err := c.Visit(s.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	idx, _ := filepath.Glob(filepath.Join(dir, "*.cdxj"))
	if len(idx) != 1 {
		t.Fatalf("indexes %v, want 1", idx)
	}
	want, err := os.ReadFile(idx[0])
	if err != nil {
		t.Fatal(err)
	}
	// The state a kill during the sort leaves: the lines unsorted (here in
	// reverse), no index, a run file.
	lines := strings.SplitAfter(string(want), "\n")
	slices.Reverse(lines)
	if err := os.WriteFile(idx[0]+".open", []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(idx[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".cdxj-run-123"), []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	w2, err := warc.New(dir)
	if err != nil {
		t.Fatalf("New after a kill during the sort = %v", err)
	}
	defer w2.Close()
	got, err := os.ReadFile(idx[0])
	if err != nil || string(got) != string(want) {
		t.Errorf("index after recovery: %q (%v), want %q", got, err, want)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".cdxj*"))
	open, _ := filepath.Glob(filepath.Join(dir, "*.open"))
	if len(left)+len(open) != 0 {
		t.Errorf("left behind: %v %v", left, open)
	}
}
