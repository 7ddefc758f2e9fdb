//go:build unix

package main

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A --state crawl writing CSV is killed with SIGKILL: its items so far are
// in the feed's temporary file, never renamed into place. The same command
// run again adopts them (feed.Resume) rather than failing on the leftover,
// and the finished file holds every page: at least once, and never more
// often than the page was fetched.
func TestCLIStateResumeAfterKillCSV(t *testing.T) {
	const pages = 20
	hold := make(chan struct{})
	reached := make(chan struct{})
	var once sync.Once
	site := newPagesSite(t, pages, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/p/10" {
				once.Do(func() { close(reached) })
				select {
				case <-hold:
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	var released sync.Once
	release := func() { released.Do(func() { close(hold) }) }
	defer release()
	dir := t.TempDir()
	state, out := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "pages.csv")
	args := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "--state", state, "-o", out}

	cmd := cliCommand(t, "", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(90 * time.Second):
		t.Fatal("the crawl never reached /p/10")
	}
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
