//go:build unix

package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A --state crawl writing CSV is killed with SIGKILL: its items so far are
// in the feed's temporary file, never renamed into place. The same command
// run again adopts them (feed.Resume) rather than failing on the leftover,
// and the finished file holds every page: at least once, and never more
// often than the page was fetched.
func TestCLIStateResumeAfterKillCSV(t *testing.T) {
	const pages = 20
	site, reached, release := newHeldSite(t, pages)
	dir := t.TempDir()
	state, out := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "pages.csv")
	args := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "--state", state, "-o", out}

	cmd, _, _ := startUntil(t, reached, args...)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	release()
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s exists after SIGKILL; want the items only in the temporary file", out)
	}

	second := cli(t, "", args...)
	if second.code != 0 {
		t.Fatalf("run after SIGKILL: exit %d; stderr:\n%s", second.code, second.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) == 0 || rows[0][0] != "url" {
		t.Fatalf("%s is not CSV with a url column (%v):\n%s", out, err, data)
	}
	got := map[string]int{}
	for _, row := range rows[1:] {
		got[row[0]]++
	}
	for i := -1; i < pages; i++ {
		p := "/"
		if i >= 0 {
			p = "/p/" + strconv.Itoa(i)
		}
		n, hits := got[site.URL+p], site.hitCount(p)
		if n < 1 || n > hits {
			t.Errorf("%s written %d times, fetched %d times; want at least once and at most once per fetch", p, n, hits)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "pages.csv" && strings.Contains(e.Name(), "pages.csv") {
			t.Errorf("%s left beside the output after the resumed run", e.Name())
		}
	}
}
