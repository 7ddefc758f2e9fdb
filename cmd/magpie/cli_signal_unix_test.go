//go:build unix

package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newStopSite is a site of pages pages whose /p/1 onwards hang until the
// client gives up, so a page asked for when the crawl stops is in flight
// and cut short, never answered; reached receives at the first such request.
// With one download at a time and a Delay, /p/0 is then answered and
// processed, and the other pages are queued.
func newStopSite(t *testing.T, pages int) (site *pagesSite, reached chan struct{}) {
	reached = make(chan struct{}, 1)
	site = newPagesSite(t, pages, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/p/") && r.URL.Path != "/p/0" {
				select {
				case reached <- struct{}{}:
				default:
				}
				<-r.Context().Done()
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	return site, reached
}

// fetchedPages counts the requests for /p/… pages that site received.
func fetchedPages(site *pagesSite) int {
	site.mu.Lock()
	defer site.mu.Unlock()
	n := 0
	for p, hits := range site.hits {
		if strings.HasPrefix(p, "/p/") {
			n += hits
		}
	}
	return n
}

// wantStoppedSummary checks the summary of a crawl of newStopSite stopped
// with the rest queued: nothing failed, the page cut short in flight (if
// one was) is counted as interrupted, and the pages never sent as not
// started (issue 40 point 13: the page in flight was "failed: cancelled").
func wantStoppedSummary(t *testing.T, stderr string, site *pagesSite, pages int) {
	t.Helper()
	fetched := fetchedPages(site)
	inFlight := fetched - site.hitCount("/p/0")
	failed := 0
	if m := regexp.MustCompile(`(?m)^failed: (\d+)$`).FindStringSubmatch(stderr); m != nil {
		failed, _ = strconv.Atoi(m[1])
	}
	if failed != 0 {
		t.Errorf("the summary counts %d failed, want none (the page in flight is interrupted, not failed); stderr:\n%s", failed, stderr)
	}
	interrupted := 0
	if m := regexp.MustCompile(`(?m)^interrupted: (\d+) `).FindStringSubmatch(stderr); m != nil {
		interrupted, _ = strconv.Atoi(m[1])
	}
	if interrupted != inFlight {
		t.Errorf("the summary counts %d interrupted, want %d (the page in flight); stderr:\n%s", interrupted, inFlight, stderr)
	}
	want := fmt.Sprintf("not started: %d ", pages-fetched)
	if !strings.Contains(stderr, want) {
		t.Errorf("the summary does not say %q:\n%s", want, stderr)
	}
}

// Issue 28 point 1: with --delay 1s and 1,000 pages queued, the first
// SIGINT (Ctrl-C) or SIGTERM stops the crawl within 2 s, not after a Delay
// per queued page: the output is finished, the pages never sent are counted
// as not started (not failed), and the status is 128 plus the signal's
// number.
func TestCLISignalStopsQueuedCrawl(t *testing.T) {
	const pages = 1000
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			site, reached := newStopSite(t, pages)
			dir := t.TempDir()
			out, errs := filepath.Join(dir, "pages.jsonl"), filepath.Join(dir, "errors.jsonl")
			cmd, stdout, stderr := startUntil(t, reached, "crawl", site.URL+"/", "--allow-loopback",
				"--delay", "1s", "--parallel", "1", "-o", out, "--errors", errs)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			r := exitResult(t, cmd.Wait(), stdout, stderr)
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("magpie exited %v after %v, want within 2s", took, tc.sig)
			}
			if r.code != tc.code {
				t.Errorf("exit %d after %v, want %d; stderr:\n%s", r.code, tc.sig, tc.code, r.stderr)
			}
			wantStoppedSummary(t, r.stderr, site, pages)
			// Issue 40 point 13: the page cut short is no failure of the site.
			if logged, err := os.ReadFile(errs); err != nil || len(logged) != 0 {
				t.Errorf("--errors holds %q (%v), want an empty file", logged, err)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("the stopped crawl wrote no output: %v", err)
			}
			got := urlsOf(jsonLines(t, string(data)))
			if got[site.URL+"/"] != 1 || got[site.URL+"/p/0"] != 1 {
				t.Errorf("output holds %v, want the start page and /p/0", got)
			}
		})
	}
}

// Issue 28 point 1: --max-duration with --delay 1s and 1,000 pages queued
// ends the crawl within 2 s of the limit, reports the limit, and counts the
// pages never sent as not started, not as failed.
func TestCLIMaxDurationStopsQueuedCrawl(t *testing.T) {
	const pages = 1000
	site, _ := newStopSite(t, pages)
	limit := 2500 * time.Millisecond
	began := time.Now()
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--delay", "1s", "--parallel", "1",
		"--max-duration", limit.String(), "-o", filepath.Join(t.TempDir(), "pages.jsonl"))
	if took := time.Since(began); took > limit+2*time.Second {
		t.Errorf("magpie ran %v with --max-duration %v, want it done within 2s of the limit", took, limit)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "stopped after --max-duration "+limit.String()) {
		t.Errorf("exit %d, want 0 and the limit named; stderr:\n%s", r.code, r.stderr)
	}
	if site.hitCount("/") != 1 {
		t.Fatalf("the start page was fetched %d times, want once", site.hitCount("/"))
	}
	wantStoppedSummary(t, r.stderr, site, pages)
}

// Issue 40 point 13: a --state crawl stopped by --max-duration says how to
// go on, as one stopped by Ctrl-C does.
func TestCLIMaxDurationStateSaysResume(t *testing.T) {
	site, _ := newStopSite(t, 5)
	dir := t.TempDir()
	state := filepath.Join(dir, "crawl.db")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--parallel", "1", "--state", state,
		"--max-duration", "1500ms", "-o", filepath.Join(dir, "pages.jsonl"))
	want := "the rest of the crawl is kept in " + state + ": run the same command again to resume"
	if r.code != 0 || !strings.Contains(r.stderr, "stopped after --max-duration 1.5s\n"+want) {
		t.Errorf("exit %d, want 0, the limit named and %q; stderr:\n%s", r.code, want, r.stderr)
	}
}

// Issue 28 point 1: a second SIGINT exits at once, while the first one's
// stop still waits for a page in flight (a --state crawl gives it a grace),
// and what was written is finished: the CSV output is in place and whole.
func TestCLISecondSignalForcesExit(t *testing.T) {
	site, reached, release := newHeldSite(t, 30)
	defer release()
	dir := t.TempDir()
	out := filepath.Join(dir, "pages.csv")
	cmd := cliCommand(t, "", "crawl", site.URL+"/", "--allow-loopback", "--parallel", "1",
		"--state", filepath.Join(dir, "crawl.db"), "-o", out)
	var stdout bytes.Buffer
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(90 * time.Second):
		t.Fatal("the crawl never reached /p/10")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The second signal once the first is being handled: /p/10 hangs, so
	// the first one's stop waits a grace for it.
	deadline := time.After(30 * time.Second)
	for !strings.Contains(stderr.String(), "stopping the crawl") {
		select {
		case <-deadline:
			t.Fatal("magpie did not answer the first SIGINT")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	r := exitResult(t, err, &stdout, bytes.NewBufferString(stderr.String()))
	if r.code != 130 || !strings.Contains(r.stderr, "exiting now") {
		t.Errorf("exit %d, want 130 and the forced exit said; stderr:\n%s", r.code, r.stderr)
	}
	if regexp.MustCompile(`crawled \d+ pages?`).MatchString(r.stderr) {
		t.Errorf("the summary was printed: the crawl stopped on its own before the second SIGINT; stderr:\n%s", r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("after the forced exit %s is not in place: %v", out, err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) < 2 || rows[0][0] != "url" {
		t.Fatalf("%s is not whole CSV with a header and pages (%v):\n%s", out, err, data)
	}
	for _, row := range rows[1:] {
		if row[0] == site.URL+"/p/10" {
			t.Errorf("the page in flight was written: %q", row)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "pages.csv" && strings.Contains(e.Name(), "pages.csv") {
			t.Errorf("%s left beside the output after the forced exit", e.Name())
		}
	}
}

// lockedBuffer is a bytes.Buffer that the test reads while the process
// writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Issue 40 point 9: two SIGINTs close together never lose the output. The
// second may cut the first one's stop short, but not the rename that puts
// -o in place: whatever the gap between them, -o exists and holds whole
// items, and no hidden temporary file is left for the next run to refuse.
// The gaps sweep the moment the crawl's own end finishes the output, which
// the old code left unguarded (a forced exit there lost -o).
func TestCLIDoubleSignalKeepsOutput(t *testing.T) {
	var gaps []time.Duration
	for g := time.Duration(0); g <= 5*time.Millisecond; g += 100 * time.Microsecond {
		gaps = append(gaps, g)
	}
	for g := 6 * time.Millisecond; g <= 20*time.Millisecond; g += time.Millisecond {
		gaps = append(gaps, g)
	}
	for i, gap := range gaps {
		ext := []string{"jsonl", "json"}[i%2]
		t.Run(fmt.Sprintf("%s/%v", ext, gap), func(t *testing.T) {
			site, reached := newStopSite(t, 20)
			dir := t.TempDir()
			out := filepath.Join(dir, "pages."+ext)
			cmd, stdout, stderr := startUntil(t, reached, "crawl", site.URL+"/", "--allow-loopback",
				"--parallel", "1", "-o", out)
			waitForItem(t, dir, "pages."+ext)
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if gap > 0 {
				<-time.After(gap)
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Fatal(err)
			}
			r := exitResult(t, cmd.Wait(), stdout, stderr)
			// A second signal that comes once magpie has finished and
			// handed signals back ends it as SIGINT does any process,
			// which a shell reports as 130 too.
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if r.code != 130 && !(ws.Signaled() && ws.Signal() == syscall.SIGINT) {
				t.Errorf("exit %d (%v), want 130; stderr:\n%s", r.code, cmd.ProcessState, r.stderr)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("after two SIGINTs %v apart -o is not in place: %v; stderr:\n%s", gap, err, r.stderr)
			}
			var items []map[string]any
			if ext == "json" {
				if err := json.Unmarshal(data, &items); err != nil {
					t.Fatalf("%s is not a JSON array: %v\n%s", out, err, data)
				}
			} else {
				items = jsonLines(t, string(data))
			}
			// The items written before the forced exit, in the pipeline's
			// order: some of the pages answered, each once.
			got := urlsOf(items)
			if len(items) == 0 || len(got) != len(items) {
				t.Errorf("%s holds %v, want pages each once", out, got)
			}
			for u := range got {
				if u != site.URL+"/" && u != site.URL+"/p/0" {
					t.Errorf("%s holds %s, which was never answered", out, u)
				}
			}
			if left := leftoverFiles(out); len(left) != 1 || left[0] != "temporary files beside it" {
				t.Errorf("left beside -o: %v", left)
			}
		})
	}
}

// waitForItem returns once the hidden temporary file of -o name in dir
// holds a whole item.
func waitForItem(t *testing.T, dir, name string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		found, _ := filepath.Glob(filepath.Join(dir, "."+name+".tmp-*"))
		for _, f := range found {
			if data, _ := os.ReadFile(f); bytes.Contains(data, []byte("}")) {
				return
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no item reached the temporary file of %s", name)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
