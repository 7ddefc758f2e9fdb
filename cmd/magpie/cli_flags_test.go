package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Issue 28 §5: flags the parser accepts but the crawl cannot use are usage
// errors (exit 2), each said in one line naming the flag, before any
// request: never a panic's stack trace.
func TestCLIFlagUsageErrors(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	dir := t.TempDir()
	state := filepath.Join(dir, "crawl.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--follow", "a[["}, `--follow "a[["`},
		{[]string{"--field", "x=a[["}, `field x`},
		{[]string{"--field", "x=h1", "--field", "x=title"}, `field name "x" is given twice`},
		{[]string{"--proxy", "ftp://127.0.0.1:21"}, `--proxy ftp://127.0.0.1:21: scheme "ftp"`},
		{[]string{"--proxy", "socks4://127.0.0.1:1080"}, `scheme "socks4"`},
		{[]string{"--delay", "-1s"}, "--delay -1s"},
		{[]string{"--timeout", "-5s"}, "--timeout -5s"},
		{[]string{"--max-duration", "-1m"}, "--max-duration -1m0s"},
		{[]string{"--retries", "-1"}, "--retries must be >= 0"},
		{[]string{"--max-pages", "-3"}, "--max-pages"},
		{[]string{"-o", filepath.Join(dir, "items.txt")}, "name it with --format"},
		{[]string{"--state", state, "-o", state}, "are the same file"},
		{[]string{"--state", state, "-o", filepath.Join(dir, ".", "crawl.db")}, "are the same file"},
	} {
		args := append([]string{"crawl", site.URL + "/", "--allow-loopback", "-q"}, tc.args...)
		r := cli(t, "", args...)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 2 || !strings.Contains(first, tc.want) || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("magpie %q: exit %d, stderr:\n%s\nwant 2 and a first line naming %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := site.hitCount("/"); n != 0 {
		t.Errorf("the usage errors fetched / %d times, want none", n)
	}
	if _, err := os.Stat(state); err == nil {
		t.Errorf("--state %s -o %s created the state file", state, state)
	}
}

// Issue 28 §5: Scrapy's .jl is JSON lines; --format names the format of a
// file whose extension names none.
func TestCLIOutputExtensions(t *testing.T) {
	site := newPagesSite(t, 2, nil)
	dir := t.TempDir()
	jl := filepath.Join(dir, "items.jl")
	if r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", jl); r.code != 0 {
		t.Fatalf("-o items.jl: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	data, err := os.ReadFile(jl)
	if err != nil {
		t.Fatal(err)
	}
	wantPages(t, jsonLines(t, string(data)), site.URL, 2)

	txt := filepath.Join(dir, "items.txt")
	if r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", txt, "--format", "csv"); r.code != 0 {
		t.Fatalf("-o items.txt --format csv: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	data, err = os.ReadFile(txt)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) != 4 || strings.Join(rows[0], ",") != "url,status,title,depth,links" {
		t.Errorf("items.txt with --format csv = %q (%v), want a CSV header and 3 rows", data, err)
	}
}

// Issue 28 §5: --retries 0 means no retries of any kind: a 429 with
// Retry-After, which the library retries by itself (BusyRetries), is asked
// once and counted as failed. The page is linked once only: a failed page
// loses its visited mark, so a second link would fetch it again.
func TestCLIRetriesZeroMeansNoBusyRetries(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<title>home</title><a href="/busy">busy</a><a href="/fine">fine</a>`)
		case "/busy":
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case "/fine":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<title>fine</title>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--retries", "0", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := hits["/busy"]; n != 1 {
		t.Errorf("/busy (429) requested %d times with --retries 0, want 1", n)
	}
	if !strings.Contains(r.stderr, "http 429") || regexp.MustCompile(`\bretr(y|ies)\b`).MatchString(r.stderr) {
		t.Errorf("summary should count the 429 as failed, with no retries:\n%s", r.stderr)
	}
}

// Issue 28 §5: a --field of an href or src attribute is an absolute URL,
// resolved against the page as Colly's AbsoluteURL resolves it; other
// attributes are as written, a fragment alone stays, and an attribute or
// element that is not there stays empty (not the page's own URL).
func TestCLIFieldURLsAreAbsolute(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/docs/page.html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>t</title><a id="rel" href="next.html">n</a><img src="/img/logo.png" alt="../x">`+
			`<a class="frag" href="#top">top</a><link rel="alternate" href="//cdn.example.test/feed.xml"><video>v</video>`)
	})
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)
	srv := site.URL
	r := cli(t, "", "crawl", srv+"/docs/page.html", "--allow-loopback", "-q", "--depth", "1",
		"--field", "next=#rel@href", "--field", "logo=img@src", "--field", "alt=img@alt", "--field", "frag=a.frag@href",
		"--field", "feed=link@href", "--field", "poster=video@poster", "--field", "none=nav@href")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	items := jsonLines(t, r.stdout)
	if len(items) != 1 {
		t.Fatalf("%d items, want 1:\n%s", len(items), r.stdout)
	}
	want := map[string]string{
		"next": srv + "/docs/next.html", "logo": srv + "/img/logo.png", "alt": "../x", "frag": "#top",
		"feed": "http://cdn.example.test/feed.xml", "poster": "", "none": "",
	}
	for k, v := range want {
		if items[0][k] != v {
			t.Errorf("field %s = %q, want %q", k, items[0][k], v)
		}
	}
}

// Issue 28 §4: the leftover of a killed CSV run whose columns differ from
// this run's --field flags cannot be carried over: --resume-output says
// why, in flags, before any request, and leaves the file alone.
func TestCLIResumeOutputColumnsDiffer(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "pages.csv")
	left := filepath.Join(dir, ".pages.csv.tmp-dead")
	const items = "url,title\nhttp://example.test/,home\n"
	if err := os.WriteFile(left, []byte(items), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{nil, "pass --resume-output"},
		{[]string{"--resume-output"}, "other columns than this run's --field flags"},
	} {
		args := append([]string{"crawl", site.URL + "/", "--allow-loopback", "-q", "-o", out, "--field", "heading=h1"}, tc.extra...)
		r := cli(t, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, left) {
			t.Errorf("magpie %q: exit %d, stderr:\n%s\nwant 2, %q and the file's name", tc.extra, r.code, r.stderr, tc.want)
		}
	}
	if data, _ := os.ReadFile(left); string(data) != items {
		t.Errorf("the leftover changed: %q", data)
	}
	if n := site.totalHits(); n != 0 {
		t.Errorf("%d requests made, want none", n)
	}
}

// totalHits is how many requests the site answered, robots.txt included.
func (s *pagesSite) totalHits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.hits {
		n += v
	}
	return n
}

// Issue 40 point 16: a --config or --list that cannot be read, and a --list
// line that is not an http or https URL, are usage errors (exit 2) before
// any request; a bad line is named by file:line.
func TestCLIListAndConfigUsageErrors(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	dir := t.TempDir()
	list := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(list, []byte("# start pages\n"+site.URL+"/\nexample.com/page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ftp := filepath.Join(dir, "ftp.txt")
	if err := os.WriteFile(ftp, []byte("\n\n\n"+site.URL+"/\nftp://example.com/file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.txt")
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"--list", missing}, "--list: open " + missing + ": no such file"},
		{"", []string{"--list", dir}, "--list " + dir + ": "},
		{"", []string{"--list", list}, `--list ` + list + `:3: "example.com/page" is not an http or https URL`},
		{"", []string{"--list", ftp}, `--list ` + ftp + `:5: "ftp://example.com/file" is not an http or https URL`},
		{site.URL + "/\n  \nnot a url\n", []string{"--list", "-"}, `--list -:3: "not a url" is not an http or https URL`},
		{"", []string{site.URL + "/", "--config", missing}, "--config: open " + missing + ": no such file"},
		{"", []string{site.URL + "/", "--config", dir}, "--config: read " + dir + ": is a directory"},
	} {
		args := append([]string{"crawl", "--allow-loopback", "-q"}, tc.args...)
		r := cli(t, tc.stdin, args...)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 2 || !strings.Contains(first, tc.want) || !strings.Contains(r.stderr, "--help") {
			t.Errorf("magpie %q: exit %d, stderr:\n%s\nwant 2, a first line naming %q and the usage hint", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := site.hitCount("/"); n != 0 {
		t.Errorf("the usage errors fetched / %d times, want none", n)
	}
}
