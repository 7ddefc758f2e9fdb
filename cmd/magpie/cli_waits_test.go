package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// busyCLISite serves / linking to /busy and /a; /busy answers 429 with
// Retry-After: retryAfter the first time (every time when always), then
// 200. It counts the requests by path.
func busyCLISite(t *testing.T, retryAfter string, always bool) (*httptest.Server, func(string) int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<title>home</title><a href="/busy">busy</a><a href="/a">a</a>`)
		case "/busy":
			if always || n == 1 {
				w.Header().Set("Retry-After", retryAfter)
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, `<title>busy</title>`)
		case "/a":
			fmt.Fprint(w, `<title>a</title>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	return site, func(p string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[p]
	}
}

// Issue 40 point 10: a request waiting out a Retry-After is named while it
// waits: -v prints a line as it begins, and the progress line (piped: one
// every 5 s) says how many wait, why, how long is left and for which page,
// so that a long wait does not look like a hang. The summary's rate of a
// crawl slower than a page a second is a decimal (point 11).
func TestCLIWaitNamed(t *testing.T) {
	site, hits := busyCLISite(t, "8", false)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-v", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if n := hits("/busy"); n != 2 {
		t.Errorf("/busy asked %d times, want 2 (the 429, then after its Retry-After)", n)
	}
	for _, re := range []string{
		// -v, as the wait begins: 8 s, or 7 s if the look came late.
		`(?m)^waiting: Retry-After, [78] s \(http 429\): ` + regexp.QuoteMeta(site.URL+"/busy") + `$`,
		// The progress line 5 s in: 3 s or so left.
		`(?m)^  2 pages  1 waiting: Retry-After, [1-5] s, /busy  0 failed  `,
		// 3 pages in 8 s or more; one retry.
		`(?m)^crawled 3 pages in [\d.]+s \(0\.\d pages/s\), 1 retry$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, r.stderr)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^waiting: `).FindAllString(r.stderr, -1)); n != 1 {
		t.Errorf("-v named the wait %d times, want once:\n%s", n, r.stderr)
	}
}

// Issue 40 point 10: --max-retry-after fails at once, as busy, a page whose
// Retry-After is longer; its host waits the bound only, not the 120 s the
// server asked for.
func TestCLIMaxRetryAfter(t *testing.T) {
	site, hits := busyCLISite(t, "120", true)
	errPath := filepath.Join(t.TempDir(), "errors.jsonl")
	began := time.Now()
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-v", "--max-retry-after", "2s",
		"--errors", errPath, "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	took := time.Since(began)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if took > 60*time.Second {
		t.Errorf("crawl took %v: it waited out the Retry-After", took)
	}
	if n := hits("/busy"); n != 1 {
		t.Errorf("/busy asked %d times, want 1: a Retry-After over the bound is not waited for", n)
	}
	if hits("/a") != 1 {
		t.Errorf("/a asked %d times, want 1", hits("/a"))
	}
	got := readFailures(t, errPath)
	f, ok := got[site.URL+"/busy"]
	if !ok || f.Kind != "busy" || f.Status != http.StatusTooManyRequests || !strings.Contains(f.Error, "2m0s") {
		t.Errorf("--errors /busy = %+v (found %v), want kind busy, status 429, the Retry-After in the error", f, ok)
	}
	for _, re := range []string{
		`(?m)^failed: busy: ` + regexp.QuoteMeta(site.URL+"/busy (from "+site.URL+"/): ") + `.*Retry-After.*2m0s`,
		`(?m)^failed: 1\n  busy\s+1$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, r.stderr)
		}
	}

	// The default bound is a minute.
	r = cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-v", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 || !regexp.MustCompile(`(?m)^failed: busy: .*/busy .*over the bound of 1m0s`).MatchString(r.stderr) {
		t.Errorf("without --max-retry-after: exit %d, stderr:\n%s\nwant /busy failed as busy, over the 1m default", r.code, r.stderr)
	}
}

// --max-retry-after takes durations of 0 or more; it is a usage error below.
func TestCLIMaxRetryAfterNegative(t *testing.T) {
	r := cli(t, "", "crawl", "http://127.0.0.1:1/", "--max-retry-after", "-1s")
	if r.code != 2 || !strings.Contains(r.stderr, "--max-retry-after -1s: want a duration of 0 or more") {
		t.Errorf("exit %d, stderr:\n%s\nwant 2 naming --max-retry-after and what it takes", r.code, r.stderr)
	}
}

// The progress line names the longest wait: how many wait, why, the time
// left in whole seconds (rounded up) and the page's path.
func TestProgressLineWaiting(t *testing.T) {
	st := &magpie.Stats{Pending: 3, Waiting: 2, Waits: []magpie.Wait{
		{URL: "http://h.test/busy?x=1", Reason: magpie.WaitRetryAfter, Until: time.Now().Add(117*time.Second + 300*time.Millisecond)},
		{URL: "http://h.test/other", Reason: magpie.WaitBackoff, Until: time.Now().Add(time.Second)},
	}}
	line := progressLine(counts{pages: 4}, st, 10*time.Second, 0)
	if want := "  4 pages  2 waiting: Retry-After, 118 s, /busy?x=1  0 failed  3 queued  0 skipped  0.4 pages/s  10s"; line != want {
		t.Errorf("progressLine() = %q, want %q", line, want)
	}
	if line := progressLine(counts{pages: 4}, &magpie.Stats{Pending: 3}, 10*time.Second, 0); strings.Contains(line, "waiting") {
		t.Errorf("progressLine() with nothing waiting = %q", line)
	}
}
