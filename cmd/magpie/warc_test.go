package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestCrawlWritesWARC runs magpie crawl --warc and reads back what it wrote:
// one closed file (none left open) holding a request and a response record
// per request the site answered, and its CDXJ index beside it.
func TestCrawlWritesWARC(t *testing.T) {
	site := newPagesSite(t, 5, nil)
	dir := filepath.Join(t.TempDir(), "archive")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", os.DevNull, "--warc", dir)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) != 0 {
		t.Errorf("files left open: %v", open)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "magpie-*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("WARC files %v, want 1", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f) // every record is a gzip member: read them all
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	site.mu.Lock()
	requests := 0
	for _, n := range site.hits {
		requests += n
	}
	site.mu.Unlock()
	text := string(data)
	if got := strings.Count(text, "WARC-Type: request\r\n"); got != requests {
		t.Errorf("request records = %d, the site answered %d", got, requests)
	}
	if got := strings.Count(text, "WARC-Type: response\r\n"); got != requests {
		t.Errorf("response records = %d, the site answered %d", got, requests)
	}
	if !strings.Contains(text, "WARC-Type: warcinfo\r\n") || !strings.Contains(text, "software: magpie") {
		t.Error("no warcinfo record naming magpie")
	}
	idx, err := os.ReadFile(strings.TrimSuffix(files[0], ".warc.gz") + ".cdxj")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(idx), "\n"); got != requests {
		t.Errorf("index lines = %d, want %d", got, requests)
	}
}

// Issue 40 point 4: magpie crawl --warc of a self-signed HTTPS site through a
// CONNECT proxy (--proxy, --insecure) archives every exchange, in plaintext,
// as a direct crawl does; it archived nothing and exited 0.
func TestCrawlWARCOfHTTPSThroughProxy(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\n")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<title>secure %s</title>", r.URL.Path)
		for i := range 4 {
			fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
		}
	}))
	site.Config.ErrorLog = log.New(io.Discard, "", 0)
	site.StartTLS()
	t.Cleanup(site.Close)
	proxy, tunnels := newConnectProxy(t)

	dir := filepath.Join(t.TempDir(), "archive")
	r := cli(t, "", "crawl", site.URL+"/", "--proxy", proxy, "--insecure", "--allow-loopback", "-q", "-o", os.DevNull, "--warc", dir)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if tunnels() == 0 {
		t.Fatal("the crawl did not go through the proxy")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "magpie-*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("WARC files %v, want 1", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	mu.Lock()
	requests := hits
	mu.Unlock()
	if requests != 6 { // robots.txt, the home page, 4 pages
		t.Errorf("the site answered %d requests, want 6", requests)
	}
	if got := strings.Count(text, "WARC-Type: response\r\n"); got != requests {
		t.Errorf("response records = %d, the site answered %d", got, requests)
	}
	if got := strings.Count(text, "WARC-Target-URI: "+site.URL+"/p/"); got != 8 { // request and response of 4 pages
		t.Errorf("records of %s/p/… = %d, want 8", site.URL, got)
	}
	if !strings.Contains(text, "<title>secure /p/3</title>") {
		t.Error("the pages are not archived in plaintext")
	}
}

// newConnectProxy starts an HTTP proxy on 127.0.0.1 that serves CONNECT
// only, and returns its URL and a count of the tunnels it opened.
func newConnectProxy(t *testing.T) (string, func() int) {
	t.Helper()
	var (
		mu      sync.Mutex
		tunnels int
		conns   []net.Conn
		wg      sync.WaitGroup
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		mu.Lock()
		tunnels++
		conns = append(conns, conn, up)
		mu.Unlock()
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(up, buf)
			_ = up.Close()
			_ = conn.Close()
		}()
		go func() {
			defer wg.Done()
			_, _ = io.Copy(conn, up)
			_ = up.Close()
			_ = conn.Close()
		}()
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close() // hijacked: the server's Close leaves them
		}
		mu.Unlock()
		wg.Wait()
	})
	return srv.URL, func() int {
		mu.Lock()
		defer mu.Unlock()
		return tunnels
	}
}

// Issue 40 point 2: magpie crawl --state --warc run again over a finished
// crawl: each 304 of the recrawl is a server-not-modified revisit record
// that names the record of the page's 200 in the first run's file
// (WARC-Refers-To, -Target-URI, -Date) and carries its payload digest.
func TestCrawlWARCRecrawlRevisitsNameTheOriginal(t *testing.T) {
	site := newEditableSite(t, map[string]string{
		"/": `<title>home</title><a href="/a">a</a>`, "/a": "<title>a</title>",
	})
	state := filepath.Join(t.TempDir(), "st.db")
	dir := filepath.Join(t.TempDir(), "archive")
	for _, extra := range [][]string{nil, {"--revisit-after", "0"}} {
		args := append([]string{"crawl", site.URL + "/", "--allow-loopback", "--state", state, "--warc", dir, "-q", "-o", os.DevNull}, extra...)
		if r := cli(t, "", args...); r.code != 0 {
			t.Fatalf("magpie %v: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
	}
	if n := site.conditionals(); n != 2 {
		t.Fatalf("the recrawl sent %d conditional requests, want 2", n)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "magpie-*.warc.gz"))
	if len(files) != 2 {
		t.Fatalf("WARC files %v, want one per run", files)
	}
	originals := map[string]map[string]string{} // URI → the 200's record
	for _, rec := range warcRecords(t, files[0]) {
		if rec["WARC-Type"] == "response" && strings.HasPrefix(rec["block"], "HTTP/1.1 200 ") {
			originals[rec["WARC-Target-URI"]] = rec
		}
	}
	revisits := 0
	for _, rec := range warcRecords(t, files[1]) {
		if rec["WARC-Type"] != "revisit" {
			continue
		}
		revisits++
		uri := rec["WARC-Target-URI"]
		o := originals[uri]
		if o == nil {
			t.Errorf("revisit of %s: the first run archived no 200 of it", uri)
			continue
		}
		if !strings.HasSuffix(rec["WARC-Profile"], "/server-not-modified") || rec["WARC-Refers-To"] != o["WARC-Record-ID"] ||
			rec["WARC-Refers-To-Target-URI"] != uri || rec["WARC-Refers-To-Date"] != o["WARC-Date"] ||
			rec["WARC-Payload-Digest"] != o["WARC-Payload-Digest"] {
			t.Errorf("revisit of %s:\n%v\nwant it to name the 200's record:\n%v", uri, rec, o)
		}
	}
	if revisits != 2 {
		t.Errorf("%d revisit records in the recrawl's file, want 2 (/ and /a)", revisits)
	}
}

// warcRecords reads a gzipped WARC file's records as their header fields
// and "block", the text after them.
func warcRecords(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, part := range strings.Split(string(data), "WARC/1.1\r\n")[1:] {
		head, block, _ := strings.Cut(part, "\r\n\r\n")
		rec := map[string]string{"block": block}
		for line := range strings.SplitSeq(head, "\r\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				rec[k] = v
			}
		}
		out = append(out, rec)
	}
	return out
}
