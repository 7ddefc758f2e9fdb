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
)

// leafSite serves / linking to /p/0 … /p/n-1, which link nowhere, and
// counts the requests by path (robots.txt: 404, not counted).
type leafSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newLeafSite(t *testing.T, n int) *leafSite {
	t.Helper()
	s := &leafSite{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<title>%s</title>", r.URL.Path)
		if r.URL.Path == "/" {
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// Issue 39 point 3: --max-pages-per-host 5 over 3 hosts of 10 pages
// fetches 5 pages of each and writes them; -v names each link skipped for
// the budget, with the page that linked to it, and the summary counts
// them; with --state (a queue run) too.
func TestCLIMaxPagesPerHost(t *testing.T) {
	for _, state := range []bool{false, true} {
		t.Run(fmt.Sprintf("state=%v", state), func(t *testing.T) {
			sites := []*leafSite{newLeafSite(t, 9), newLeafSite(t, 9), newLeafSite(t, 9)}
			args := []string{"crawl", sites[0].URL + "/", sites[1].URL + "/", sites[2].URL + "/",
				"--allow-loopback", "--max-pages-per-host", "5", "-v"}
			if state {
				args = append(args, "--state", filepath.Join(t.TempDir(), "crawl.db"))
			}
			r := cli(t, "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if items := jsonLines(t, r.stdout); len(items) != 15 {
				t.Errorf("%d items written, want 15", len(items))
			}
			for i, s := range sites {
				s.mu.Lock()
				fetched := 0
				for _, n := range s.hits {
					fetched += n
				}
				if fetched != 5 || s.hits["/"] != 1 {
					t.Errorf("host %d served %v, want / and 4 pages", i, s.hits)
				}
				// Each page not fetched is named once by -v, with the page
				// linking to it.
				for p := range 9 {
					path := fmt.Sprintf("/p/%d", p)
					line := "skipped: over --max-pages-per-host: " + s.URL + path + " (from " + s.URL + "/)\n"
					if n := strings.Count(r.stderr, line); n != 1-s.hits[path] {
						t.Errorf("stderr has %q %d times, want %d (the page was fetched %d times)", line, n, 1-s.hits[path], s.hits[path])
					}
				}
				s.mu.Unlock()
			}
			if !regexp.MustCompile(`(?m)^skipped: 15$`).MatchString(r.stderr) ||
				!regexp.MustCompile(`(?m)^  over --max-pages-per-host \(skipped\) +15$`).MatchString(r.stderr) {
				t.Errorf("the summary does not count 15 links over --max-pages-per-host; stderr:\n%s", r.stderr)
			}
		})
	}
}

// Issue 39 point 3, as the README says: a resumed --state crawl counts
// each host afresh. The first run stops after 2 requests (--max-pages), the
// run resuming it takes 3 more of the host's pages (its budget) and skips
// the rest; no page is fetched twice.
func TestCLIMaxPagesPerHostResumed(t *testing.T) {
	site := newLeafSite(t, 9)
	state := filepath.Join(t.TempDir(), "crawl.db")
	args := []string{"crawl", site.URL + "/", "--allow-loopback", "-q", "--state", state, "--max-pages-per-host", "3"}
	if r := cli(t, "", append(args, "--max-pages", "2")...); r.code != 0 {
		t.Fatalf("first run: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	site.mu.Lock()
	first := len(site.hits)
	site.mu.Unlock()
	if first != 2 {
		t.Fatalf("first run fetched %d pages, want 2", first)
	}
	r := cli(t, "", args...)
	if r.code != 0 {
		t.Fatalf("second run: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if items := jsonLines(t, r.stdout); len(items) != 3 {
		t.Errorf("the resumed run wrote %d items, want 3", len(items))
	}
	site.mu.Lock()
	defer site.mu.Unlock()
	fetched := 0
	for p, n := range site.hits {
		fetched += n
		if n != 1 {
			t.Errorf("%s fetched %d times", p, n)
		}
	}
	if fetched != 5 {
		t.Errorf("the two runs fetched %v, want 5 pages: 2, then 3 more", site.hits)
	}
}

// Issue 39 point 3: a --max-pages-per-host below 0, or not a number, is a
// usage error (exit 2) naming the flag, before any request.
func TestCLIMaxPagesPerHostUsage(t *testing.T) {
	site := newLeafSite(t, 1)
	for _, v := range []string{"-1", "five"} {
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--max-pages-per-host", v)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 2 || !strings.Contains(first, "--max-pages-per-host") || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("--max-pages-per-host %s: exit %d, stderr:\n%s\nwant 2 and a first line naming the flag", v, r.code, r.stderr)
		}
	}
	site.mu.Lock()
	defer site.mu.Unlock()
	if len(site.hits) != 0 {
		t.Errorf("the usage errors fetched %v, want nothing", site.hits)
	}
}
