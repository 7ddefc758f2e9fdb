package main

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
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
