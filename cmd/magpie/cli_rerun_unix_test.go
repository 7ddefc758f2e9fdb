//go:build unix

package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// gate holds the requests of one path until it is released; reached is
// closed at the first such request.
type gate struct {
	path             string
	reached, release chan struct{}
	once, freed      sync.Once
}

func (g *gate) open() { g.freed.Do(func() { close(g.release) }) }

// newGatedSite is newPagesSite whose gated paths hang until released.
func newGatedSite(t *testing.T, pages int, paths ...string) (*pagesSite, map[string]*gate) {
	t.Helper()
	gates := map[string]*gate{}
	for _, p := range paths {
		g := &gate{path: p, reached: make(chan struct{}), release: make(chan struct{})}
		gates[p] = g
		t.Cleanup(g.open)
	}
	site := newPagesSite(t, pages, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g := gates[r.URL.Path]; g != nil {
				g.once.Do(func() { close(g.reached) })
				select {
				case <-g.release:
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	return site, gates
}

// killAt starts magpie with args, waits until g is reached, and kills it
// with SIGKILL.
func killAt(t *testing.T, g *gate, args ...string) {
	t.Helper()
	cmd, _, _ := startUntil(t, g.reached, args...)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	g.open()
}

// leftovers are the hidden temporary files beside out.
func leftovers(t *testing.T, out string) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".*"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// Issue 28 §4: a run killed with SIGKILL leaves its items in a hidden
// temporary file. The same command run again (or with a new --state file)
// refuses before its first request, naming the file and --resume-output;
// with --resume-output the
// killed run's items are carried over and the output is complete.
func TestCLILeftoverCheckedBeforeFetching(t *testing.T) {
	const pages = 20
	site, gates := newGatedSite(t, pages, "/p/10")
	out := filepath.Join(t.TempDir(), "pages.jsonl")
	args := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "-q", "-o", out}

	killAt(t, gates["/p/10"], args...)
	left := leftovers(t, out)
	if len(left) != 1 {
		t.Fatalf("after SIGKILL: temporary files %q, want one", left)
	}
	hits := site.totalHits()
	leftData, err := os.ReadFile(left[0])
	if err != nil {
		t.Fatal(err)
	}
	// The complete lines: a torn last one is dropped when adopted.
	leftLines := string(leftData[:bytes.LastIndexByte(leftData, '\n')+1])
	killed := urlsOf(jsonLines(t, leftLines))
	if len(killed) == 0 {
		t.Fatal("the killed run left no complete item; the test needs some")
	}

	again := cli(t, "", args...)
	if again.code != 2 || !strings.Contains(again.stderr, "--resume-output") || !strings.Contains(again.stderr, left[0]) ||
		strings.Contains(again.stderr, "feed.Resume") {
		t.Fatalf("same command again: exit %d, stderr:\n%s\nwant 2, naming %s and --resume-output", again.code, again.stderr, left[0])
	}
	// A fresh --state crawl does not adopt a dead run's items by itself:
	// refused too, before its state file is made.
	fresh := filepath.Join(filepath.Dir(out), "fresh.db")
	if r := cli(t, "", append(args, "--state", fresh)...); r.code != 2 || !strings.Contains(r.stderr, "--resume-output") {
		t.Errorf("with a new --state: exit %d, stderr:\n%s\nwant 2 and --resume-output", r.code, r.stderr)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Errorf("the refused run created its state file %s", fresh)
	}
	if n := site.totalHits(); n != hits {
		t.Errorf("the refused runs made %d requests, want none before the check", n-hits)
	}

	resumed := cli(t, "", append(args, "--resume-output")...)
	if resumed.code != 0 {
		t.Fatalf("--resume-output: exit %d; stderr:\n%s", resumed.code, resumed.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := urlsOf(jsonLines(t, string(data)))
	for i := -1; i < pages; i++ {
		p := "/"
		if i >= 0 {
			p = "/p/" + strconv.Itoa(i)
		}
		// Without --state the second run crawls everything again: each page
		// is written by it, and those the killed run wrote are there twice.
		if n := got[site.URL+p]; n < 1 || n > 2 {
			t.Errorf("%s written %d times, want once or twice", p, n)
		}
	}
	for u := range killed {
		if got[u] != 2 {
			t.Errorf("%s, written by the killed run, is in the output %d times, want twice: its items were not carried over", u, got[u])
		}
	}
	if left := leftovers(t, out); len(left) != 0 {
		t.Errorf("temporary files %q left after the resumed run", left)
	}
}

// readItemURLs parses a CSV or JSON output and counts its items' URLs.
func readItemURLs(t *testing.T, out string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	if strings.HasSuffix(out, ".csv") {
		rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(rows) == 0 || rows[0][0] != "url" {
			t.Fatalf("%s is not CSV with a url column (%v):\n%s", out, err, data)
		}
		for _, row := range rows[1:] {
			got[row[0]]++
		}
		return got
	}
	var items []map[string]any
	if err := json.Unmarshal(data, &items); err != nil {
		t.Fatalf("%s is not a JSON array: %v\n%s", out, err, data)
	}
	return urlsOf(items)
}

// Issue 28 §4: --state with CSV and JSON output resumes. An interrupted run
// leaves a complete file; a run killed with SIGKILL after it leaves its
// items (the earlier file's and its own) in the temporary file; the next
// run finishes the crawl, and the file holds every page, at least once and
// never more often than it was fetched (the export is at-least-once). Run
// once more, the finished crawl says so, fetches nothing and leaves the
// file (or the absence of one) as it was.
func TestCLIStateResumesCSVAndJSON(t *testing.T) {
	const pages = 30
	for _, ext := range []string{"csv", "json"} {
		t.Run(ext, func(t *testing.T) {
			site, gates := newGatedSite(t, pages, "/p/10", "/p/20")
			dir := t.TempDir()
			state, out := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "pages."+ext)
			args := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "-q", "--state", state, "-o", out}

			// 1: interrupted at /p/10; a complete file with some pages.
			cmd, stdout, stderr := startUntil(t, gates["/p/10"].reached, args...)
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			first := exitResult(t, cmd.Wait(), stdout, stderr)
			gates["/p/10"].open()
			if first.code != 130 {
				t.Fatalf("interrupted run: exit %d; stderr:\n%s", first.code, first.stderr)
			}
			if n := len(readItemURLs(t, out)); n == 0 || n >= pages {
				t.Fatalf("interrupted run wrote %d pages, want some but not all", n)
			}

			// 2: killed at /p/20.
			killAt(t, gates["/p/20"], args...)
			if left := leftovers(t, out); len(left) != 1 {
				t.Fatalf("after SIGKILL: temporary files %q, want one", left)
			}

			// 3: finishes.
			third := cli(t, "", args...)
			if third.code != 0 {
				t.Fatalf("resumed run: exit %d; stderr:\n%s", third.code, third.stderr)
			}
			got := readItemURLs(t, out)
			for i := -1; i < pages; i++ {
				p := "/"
				if i >= 0 {
					p = "/p/" + strconv.Itoa(i)
				}
				// A kill may come between a page's item and its
				// acknowledgement: that page is fetched and written again.
				if n, hits := got[site.URL+p], site.hitCount(p); n < 1 || n > hits {
					t.Errorf("%s written %d times, fetched %d times; want at least once and at most once per fetch", p, n, hits)
				}
			}
			if len(got) != pages+1 {
				t.Errorf("%d pages in %s, want %d", len(got), out, pages+1)
			}
			if left := leftovers(t, out); len(left) != 0 {
				t.Errorf("temporary files %q left after the crawl finished", left)
			}

			// 4: finished; nothing fetched, nothing written.
			before, _ := os.ReadFile(out)
			beforeInfo, _ := os.Stat(out)
			hits := site.totalHits()
			other := filepath.Join(dir, "other."+ext)
			for _, o := range []string{out, other} {
				r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--parallel", "1", "--state", state, "-o", o)
				if r.code != 0 || !strings.Contains(r.stderr, "is finished") {
					t.Errorf("finished crawl run again (-o %s): exit %d, stderr:\n%s\nwant 0 and a note", filepath.Base(o), r.code, r.stderr)
				}
			}
			if n := site.totalHits(); n != hits {
				t.Errorf("the finished crawl made %d requests", n-hits)
			}
			after, _ := os.ReadFile(out)
			afterInfo, _ := os.Stat(out)
			if !bytes.Equal(before, after) || !afterInfo.ModTime().Equal(beforeInfo.ModTime()) {
				t.Errorf("%s changed by the finished crawl's run", out)
			}
			if _, err := os.Stat(other); err == nil {
				t.Errorf("the finished crawl created %s", other)
			}
		})
	}
}

// Issue 28 §5: when standard output and standard error are one terminal,
// an item never starts on the live progress line: the line is cleared
// first. A page held back keeps the crawl going until a progress report
// has been drawn after the items so far.
func TestCLIItemsClearTheProgressLine(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("skipping: script(1) is not installed (util-linux)")
	}
	site, gates := newGatedSite(t, 6, "/p/3")
	bin := magpieBinary(t)
	cmd := cliCommand(t, "")
	cmd.Path, cmd.Args = scriptBin, []string{"script", "-qec", "stty cols 100 rows 20; " + bin + " crawl " + site.URL + "/ --allow-loopback --parallel 1", "/dev/null"}
	term := &syncBuffer{wrote: make(chan struct{}, 1)}
	cmd.Stdout, cmd.Stderr = term, term
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gates["/p/3"].reached:
	case <-time.After(90 * time.Second):
		t.Fatal("the crawl never reached /p/3")
	}
	// Wait until a progress report follows the items written so far.
	deadline := time.After(90 * time.Second)
	for !strings.Contains(term.String()[max(strings.LastIndex(term.String(), "}"), 0):], "queued") {
		select {
		case <-term.wrote:
		case <-deadline:
			t.Fatalf("no progress report after the items:\n%q", term.String())
		}
	}
	gates["/p/3"].open()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("magpie under script: %v\n%q", err, term.String())
	}
	screen := term.String()
	items := 0
	for i := 0; ; {
		j := strings.Index(screen[i:], `{"url"`)
		if j < 0 {
			break
		}
		at := i + j
		items++
		before := screen[:at]
		if !strings.HasSuffix(before, "\n") && !strings.HasSuffix(before, "\r\x1b[K") && at != 0 {
			t.Errorf("item %d starts after %q, not at the start of a clean line", items, before[max(len(before)-40, 0):])
		}
		i = at + 1
	}
	if items != 7 {
		t.Errorf("%d items on the terminal, want 7:\n%q", items, screen)
	}
	if !strings.Contains(screen, "s\x1b[K\r\x1b[K{\"url\"") {
		t.Errorf("no item followed a cleared progress report:\n%q", screen)
	}
}
