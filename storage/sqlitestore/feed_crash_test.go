package sqlitestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/feed"
	"github.com/magpiecrawl/magpie/queue"
)

// TestHelperFeedCrawler is the child process of TestFeedSurvivesKills: it
// crawls MAGPIE_FEED_SITE with the Store at MAGPIE_FEED_DB and exports one
// item per page to MAGPIE_FEED_ITEMS, opened as MAGPIE_FEED_MODE says:
// "append" (feed.Append), "resume" (feed.Resume) or "default" (no option).
// It does nothing in a normal test run.
func TestHelperFeedCrawler(t *testing.T) {
	dbPath, site, items := os.Getenv("MAGPIE_FEED_DB"), os.Getenv("MAGPIE_FEED_SITE"), os.Getenv("MAGPIE_FEED_ITEMS")
	if dbPath == "" || site == "" || items == "" {
		t.Skip("helper process for TestFeedSurvivesKills")
	}
	var opts []feed.Option
	switch os.Getenv("MAGPIE_FEED_MODE") {
	case "append":
		opts = append(opts, feed.Append())
	case "resume":
		opts = append(opts, feed.Resume())
	}
	exp, err := feed.Create(items, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := exp.Close(); err != nil {
			t.Error(err)
		}
	}()
	s, err := Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := magpie.NewCollector()
	if err := c.SetStorage(s); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.DOM.AttrOr("href", "")) })
	c.OnScraped(func(r *magpie.Response) { r.Emit(r.Request.URL.Path) })
	c.OnError(func(_ *magpie.Response, err error) { t.Errorf("crawl error: %v", err) })
	c.Pipeline(exp.Processor())
	q, err := queue.New(4, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
}

// TestFeedSurvivesKills SIGKILLs a crawler exporting items to a file three
// times mid-crawl, then lets a last run finish, for each way of opening the
// file. In the crash-safe modes (Append, and Create with Resume) every
// page's item is in the file, every line parses, and an item repeats only
// for a page that was leased (in flight) at a kill: the export is
// at-least-once, since such a page may have written its item and died
// before its acknowledgement. A plain Create refuses, loudly, to start over
// the items a killed run left in its temporary file.
func TestFeedSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills crawler processes")
	}
	for _, mode := range []string{"append", "resume", "default"} {
		t.Run(mode, func(t *testing.T) { feedSurvivesKills(t, mode, []int{300, 450, 600}) })
	}
}

func feedSurvivesKills(t *testing.T, mode string, kills []int) {
	site := &crashSite{counts: make(map[int]int), kill: make(chan struct{})}
	srv := httptest.NewServer(site)
	defer srv.Close()
	dbPath := filepath.Join(t.TempDir(), "crawl.db")
	itemsDir := t.TempDir()
	itemsPath := filepath.Join(itemsDir, "items.jsonl")

	seedQueue(t, dbPath, srv.URL+"/p/0")

	start := func() (*exec.Cmd, chan error) {
		return startHelper(t, "TestHelperFeedCrawler", "MAGPIE_FEED_DB="+dbPath, "MAGPIE_FEED_SITE="+srv.URL,
			"MAGPIE_FEED_ITEMS="+itemsPath, "MAGPIE_FEED_MODE="+mode)
	}

	allowedDup := map[int]bool{}
	for i, k := range kills {
		kill := site.arm(k)
		cmd, done := start()
		select {
		case <-kill:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-done
		case err := <-done:
			if mode == "default" && i > 0 {
				// Refused: the killed run's items are in a leftover.
				if err == nil || !strings.Contains(err.Error(), feed.ErrLeftover.Error()) ||
					!strings.Contains(err.Error(), ".items.jsonl.tmp-") || !strings.Contains(err.Error(), "feed.Resume()") {
					t.Fatalf("a plain Create after a kill: exit %v, want a refusal naming the leftover", err)
				}
				if _, err := os.Stat(itemsPath); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("items.jsonl exists after the refusal (%v): the leftover's items went nowhere", err)
				}
				return
			}
			t.Fatalf("crawler exited before the kill point (%d fetches): %v", k, err)
		}
		for _, p := range leasedPages(t, dbPath) {
			allowedDup[p] = true
		}
	}
	if mode == "default" {
		t.Fatal("a plain Create was never refused")
	}
	_, done := start()
	if err := <-done; err != nil {
		t.Fatalf("final crawler error = %v", err)
	}

	data, err := os.ReadFile(itemsPath)
	if err != nil {
		t.Fatal(err)
	}
	items := map[int]int{}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for _, line := range lines {
		var path string
		if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &path) != nil {
			t.Fatalf("item line %q does not parse", line)
		}
		var n int
		if _, err := fmt.Sscanf(path, "/p/%d", &n); err != nil {
			t.Fatalf("item %q: %v", path, err)
		}
		items[n]++
	}
	for i := range crashPages {
		switch n := items[i]; {
		case n == 0:
			t.Errorf("the item of page %d was lost", i)
		case n > 1 && !allowedDup[i]:
			t.Errorf("the item of page %d is in the file %d times, but the page was not in flight at a kill", i, n)
		}
	}
	if entries, _ := os.ReadDir(itemsDir); len(entries) != 1 {
		t.Errorf("the items directory holds %d files, want only items.jsonl", len(entries))
	}
	t.Logf("%s: %d item lines for %d pages, %d pages in flight at kills", mode, len(lines), crashPages, len(allowedDup))
}
