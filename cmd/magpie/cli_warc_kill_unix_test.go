//go:build unix

package main

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// archivedRecord matches a response or revisit record's header up to its
// target URI.
var archivedRecord = regexp.MustCompile(`WARC-Type: (?:response|revisit)\r\n(?:[^\r\n]+\r\n)*?WARC-Target-URI: (\S+)\r\n`)

// A --state --warc crawl is killed with SIGKILL: it leaves its WARC file
// open (name.warc.gz.open), which no reader picks up. The same command run
// again recovers that file (renamed, indexed, every record whole), writes
// the rest of the crawl into the next file, and between the two every page
// is archived: the pages acknowledged before the kill, which the second run
// does not fetch again, are in the recovered file.
func TestCLIWARCAfterKill(t *testing.T) {
	const pages = 20
	site, reached, release := newHeldSite(t, pages)
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	args := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "-q",
		"--state", filepath.Join(dir, "crawl.db"), "-o", os.DevNull, "--warc", archive}

	cmd, _, _ := startUntil(t, reached, args...)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	release()
	if closed, _ := filepath.Glob(filepath.Join(archive, "*.warc.gz")); len(closed) != 0 {
		t.Fatalf("closed WARC files after SIGKILL: %v; want only the open one", closed)
	}
	if open, _ := filepath.Glob(filepath.Join(archive, "*.warc.gz.open")); len(open) != 1 {
		t.Fatalf("open WARC files after SIGKILL: %v; want 1", open)
	}

	second := cli(t, "", args...)
	if second.code != 0 {
		t.Fatalf("run after SIGKILL: exit %d; stderr:\n%s", second.code, second.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(archive, "*.open")); len(left) != 0 {
		t.Errorf("left open after the second run: %v", left)
	}
	files, _ := filepath.Glob(filepath.Join(archive, "magpie-*.warc.gz"))
	if len(files) != 2 || !strings.HasSuffix(files[0], "-00001.warc.gz") || !strings.HasSuffix(files[1], "-00002.warc.gz") {
		t.Fatalf("WARC files %v; want the recovered -00001 and the second run's -00002", files)
	}
	archived := map[string]int{}
	for n, f := range files {
		text := readMembers(t, f)
		records := archivedRecord.FindAllStringSubmatch(text, -1)
		// The killed run fetched / and /p/0 … /p/9 before it hung at
		// /p/10: the recovered file holds them.
		if n == 0 && len(records) < 10 {
			t.Errorf("the recovered file holds %d response records; want at least the 10 pages fetched before the kill", len(records))
		}
		for _, m := range records {
			archived[strings.TrimPrefix(m[1], site.URL)]++
		}
		idx, err := os.ReadFile(strings.TrimSuffix(f, ".warc.gz") + ".cdxj")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(idx), "\n"); n != len(records) {
			t.Errorf("%s: %d index lines for %d response and revisit records", filepath.Base(f), n, len(records))
		}
	}
	for i := -1; i < pages; i++ {
		p := "/"
		if i >= 0 {
			p = "/p/" + strconv.Itoa(i)
		}
		if archived[p] == 0 || archived[p] > site.hitCount(p) {
			t.Errorf("%s archived %d times, fetched %d times; want at least once and at most once per fetch", p, archived[p], site.hitCount(p))
		}
	}
}

// readMembers decompresses every gzip member of the WARC file at path and
// fails unless all of them are whole.
func readMembers(t *testing.T, path string) string {
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
		t.Fatalf("%s: %v after %d bytes; want whole records only", filepath.Base(path), err, len(data))
	}
	return string(data)
}
