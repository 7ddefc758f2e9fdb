package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// linkySite serves / and /p/0 … /p/n-1, every page linking to every page,
// to /private/a and /private/b (which robots.txt disallows) and to
// /missing (404).
func linkySite(t *testing.T, n int) *httptest.Server {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
		case r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/p/"):
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<title>page</title><a href="/">home</a>`)
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
			fmt.Fprint(w, `<a href="/private/a">a</a><a href="/private/b">b</a><a href="/missing">m</a><a href="/missing#again">m</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	return site
}

// Issue 40 point 11: the summary counts each URL skipped once, however
// many links lead to it: two pages blocked by robots.txt and linked from 13
// pages are 2, and a --max-pages cap of 4 over 14 URLs skips the other 10
// (a link back to a page fetched is already visited, not over the cap);
// -v names each URL robots.txt blocks once (point 12).
func TestCLISkipsCountURLs(t *testing.T) {
	site := linkySite(t, 12)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-v", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, re := range []string{`(?m)^crawled 13 pages in`, `(?m)^skipped: 2$`, `(?m)^  blocked by robots\.txt\s+2$`} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("summary does not match %s:\n%s", re, r.stderr)
		}
	}
	for _, p := range []string{"/private/a", "/private/b"} {
		re := regexp.MustCompile(`(?m)^skipped: blocked by robots\.txt: ` + regexp.QuoteMeta(site.URL+p) + ` \(from ` + regexp.QuoteMeta(site.URL) + `/[^)]*\)$`)
		if n := len(re.FindAllString(r.stderr, -1)); n != 1 {
			t.Errorf("-v names %s %d times, want once:\n%s", p, n, r.stderr)
		}
	}

	r = cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--max-pages", "4", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("--max-pages 4: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	// 4 requests: / and 3 pages (or /missing); the other URLs are skipped.
	re := regexp.MustCompile(`(?m)^  over --max-pages \(skipped\)\s+(\d+)$`)
	m := re.FindStringSubmatch(r.stderr)
	if m == nil || m[1] != "10" {
		t.Errorf("--max-pages 4 over 14 URLs: summary %v, want 10 URLs over the cap (13 pages and /missing, less the 4 sent):\n%s", m, r.stderr)
	}
}

// Issue 40 point 11: one link to a page already visited is "1 link".
func TestCLIAlreadyVisitedSingular(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<title>home</title><a href="/a">a</a>`)
		case "/a":
			fmt.Fprint(w, `<title>a</title><a href="/">home</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--ignore-robots", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^already visited: 1 link \(not fetched again\)$`).MatchString(r.stderr) {
		t.Errorf("summary lacks \"already visited: 1 link\":\n%s", r.stderr)
	}
}

// Issue 40 point 12: --errors names up to 10 pages linking to a broken URL,
// and counts the others: /missing, linked from 13 pages (twice each), lists
// 10 of them (the page its request came from first) and 3 more. --include-failed items
// carry the failure's kind and error.
func TestCLIErrorsReferrers(t *testing.T) {
	site := linkySite(t, 12)
	errPath := filepath.Join(t.TempDir(), "errors.jsonl")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--errors", errPath, "--include-failed")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	got := readFailures(t, errPath)
	f, ok := got[site.URL+"/missing"]
	if !ok || len(got) != 1 {
		t.Fatalf("--errors = %v, want /missing alone", got)
	}
	pages := map[string]bool{site.URL + "/": true}
	for i := range 12 {
		pages[fmt.Sprintf("%s/p/%d", site.URL, i)] = true
	}
	// From is the page whose link was taken: / or a page fetched while /
	// was still being read.
	if !pages[f.From] || len(f.LinkedFrom) != 10 || f.LinkedFrom[0] != f.From || f.LinkedFromMore != 3 {
		t.Errorf("/missing: from %q, linked_from %q (%d), linked_from_more %d; want 10 pages listed, from first, and 3 more",
			f.From, f.LinkedFrom, len(f.LinkedFrom), f.LinkedFromMore)
	}
	for i, p := range f.LinkedFrom {
		if !pages[p] || slices.Index(f.LinkedFrom, p) != i {
			t.Errorf("linked_from[%d] = %q: not a page of the site, or listed twice", i, p)
		}
	}
	for _, it := range jsonLines(t, r.stdout) {
		if it["url"] != site.URL+"/missing" {
			if _, ok := it["kind"]; ok {
				t.Errorf("item %v of a page fetched has a kind", it)
			}
			continue
		}
		if it["status"] != 404.0 || it["kind"] != "http" || it["error"] != "Not Found" {
			t.Errorf("--include-failed item %v, want status 404, kind http, error Not Found", it)
		}
	}
}

// The --errors lines are written as requests fail, then written again with
// the pages found linking since; the lines of an earlier run that a
// resumed --state crawl appends to are kept as they were.
func TestErrorLogRewriteKeepsEarlierRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errors.jsonl")
	earlier := `{"url":"http://h.test/old","status":404,"kind":"http","error":"Not Found","attempts":1}` + "\n"
	if err := os.WriteFile(path, []byte(earlier), 0o644); err != nil {
		t.Fatal(err)
	}
	ff := &failFlags{errorsFile: path}
	fl, err := ff.open(true, true, nil) // a --state crawl that resumes
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://h.test/gone"
	fl.write([]uint64{urlHash(gone)}, failure{URL: gone, Status: 404, Kind: "http", Error: "Not Found", Attempts: 1, From: "http://h.test/"}, "http 404")
	fl.linked(gone, "http://h.test/b")
	fl.linked(gone, "http://h.test/b") // the same page again
	fl.linked("http://h.test/fine", "http://h.test/b")
	fl.close()
	if err := fl.err(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := earlier + `{"url":"http://h.test/gone","status":404,"kind":"http","error":"Not Found","attempts":1,"from":"http://h.test/","linked_from":["http://h.test/","http://h.test/b"]}` + "\n"
	if string(data) != want {
		t.Errorf("--errors file:\n%s\nwant:\n%s", data, want)
	}
}

// The summary's first line counts pages in the singular too: "crawled 1
// page", not "1 pages".
func TestCLICrawledOnePage(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>alone</title>`)
	}))
	t.Cleanup(site.Close)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--ignore-robots", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^crawled 1 page in [\d.]+s \(`).MatchString(r.stderr) {
		t.Errorf("summary lacks \"crawled 1 page in\":\n%s", r.stderr)
	}
}

// A first --state run truncates an --errors file left from elsewhere, as a
// run without --state does; only a run that finds its state file (a resume
// or a recrawl) appends. (The state file, created when opened, used to make
// every first run append.)
func TestCLIErrorsFirstStateRunTruncates(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `<title>home</title><a href="/missing">m</a>`)
	}))
	t.Cleanup(site.Close)
	dir := t.TempDir()
	errPath := filepath.Join(dir, "errors.jsonl")
	stale := `{"url":"http://stale.test/","status":500,"kind":"http","error":"old","attempts":1}` + "\n"
	if err := os.WriteFile(errPath, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--ignore-robots", "-q", "--state", filepath.Join(dir, "st.db"),
		"--errors", errPath, "-o", filepath.Join(dir, "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	got := readFailures(t, errPath)
	if _, ok := got["http://stale.test/"]; ok || len(got) != 1 {
		t.Errorf("--errors after a first --state run = %v, want %s/missing alone", got, site.URL)
	}
}
