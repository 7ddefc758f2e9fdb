package main

import (
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// editableSite serves pages from a map the test edits, with ETag and
// Last-Modified (http.ServeContent answers conditional requests), and
// counts the requests that carried a validator.
type editableSite struct {
	*httptest.Server
	mu          sync.Mutex
	pages       map[string]string
	version     map[string]int
	conditional int
}

func newEditableSite(t *testing.T, pages map[string]string) *editableSite {
	s := &editableSite{pages: pages, version: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, ok := s.pages[r.URL.Path]
		v := s.version[r.URL.Path]
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			s.conditional++
		}
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"v`+string(rune('0'+v))+`"`)
		mod := time.Date(2025, 1, 1, v, 0, 0, 0, time.UTC)
		http.ServeContent(w, r, "", mod, strings.NewReader(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *editableSite) set(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body == "" {
		delete(s.pages, path)
		return
	}
	s.pages[path] = body
	s.version[path]++
}

func (s *editableSite) conditionals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conditional
}

// changesOf maps each item's path to its "change" field.
func changesOf(t *testing.T, r result, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, it := range jsonLines(t, r.stdout) {
		u, _ := it["url"].(string)
		ch, _ := it["change"].(string)
		out[strings.TrimPrefix(u, base)] = ch
	}
	return out
}

func wantChanges(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: items %v, want %v", what, got, want)
		return
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s change = %q, want %q (all: %v)", what, p, got[p], w, got)
		}
	}
}

// Issue 30: magpie crawl --state run again over a finished crawl recrawls
// it: conditional requests, and a change field on every item, gone pages
// included; --revisit-after keeps pages fetched recently from being
// fetched; --refetch sends no validators.
func TestCLIRecrawl(t *testing.T) {
	site := newEditableSite(t, map[string]string{
		"/":  `<a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>`,
		"/a": "<title>a</title>", "/b": "<title>b</title>", "/c": "<title>c</title>",
	})
	state := filepath.Join(t.TempDir(), "st.db")
	run := func(extra ...string) result {
		t.Helper()
		args := append([]string{"crawl", site.URL + "/", "--allow-loopback", "--state", state, "-o", "-"}, extra...)
		r := cli(t, "", args...)
		if r.code != 0 && r.code != 1 {
			t.Fatalf("magpie %v: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		return r
	}
	first := run()
	wantChanges(t, "first crawl", changesOf(t, first, site.URL), map[string]string{"/": "new", "/a": "new", "/b": "new", "/c": "new"})
	// Issue 40 point 13: only a recrawl reports what changed.
	if strings.Contains(first.stderr, "recrawl:") {
		t.Errorf("the first crawl's summary has a recrawl line:\n%s", first.stderr)
	}

	site.set("/b", "<title>b2</title>")
	site.set("/c", "")
	site.set("/", `<a href="/a">a</a><a href="/b">b</a><a href="/c">c</a><a href="/d">d</a>`)
	site.set("/d", "<title>d</title>")
	// Run again at once, nothing is due (--revisit-after's default is a
	// day): the crawl says it is finished and fetches nothing.
	if again := run(); !strings.Contains(again.stderr, "is finished") || site.conditionals() != 0 {
		t.Errorf("finished crawl run again within --revisit-after: %d conditional requests, stderr:\n%s\nwant none and a note", site.conditionals(), again.stderr)
	}
	second := run("--revisit-after", "0")
	wantChanges(t, "second crawl", changesOf(t, second, site.URL),
		map[string]string{"/": "changed", "/a": "unchanged", "/b": "changed", "/c": "gone", "/d": "new"})
	if !strings.Contains(second.stderr, "recrawl: 1 new, 2 changed, 1 unchanged, 1 gone") {
		t.Errorf("second crawl summary lacks the recrawl counts:\n%s", second.stderr)
	}
	// The start URL, due like every page, is queued once: no refusal of
	// it, and links to pages revisited in this run are not "not due".
	if strings.Contains(second.stderr, "not due for a revisit") || !strings.Contains(second.stderr, "; 0 links to pages not due") {
		t.Errorf("second crawl refused a page revisited in the same run as not due:\n%s", second.stderr)
	}
	if n := site.conditionals(); n != 4 {
		t.Errorf("second crawl sent %d conditional requests, want 4 (/, /a, /b, /c)", n)
	}

	third := run("--revisit-after", "1h")
	wantChanges(t, "--revisit-after 1h", changesOf(t, third, site.URL), map[string]string{"/": "unchanged"})

	before := site.conditionals()
	fourth := run("--refetch", "--revisit-after", "0")
	wantChanges(t, "--refetch", changesOf(t, fourth, site.URL),
		map[string]string{"/": "unchanged", "/a": "unchanged", "/b": "unchanged", "/c": "gone", "/d": "unchanged"})
	if n := site.conditionals() - before; n != 0 {
		t.Errorf("--refetch sent %d conditional requests, want 0", n)
	}

	if r := cli(t, "", "crawl", site.URL+"/", "--refetch"); r.code != 2 || !strings.Contains(r.stderr, "need --state") {
		t.Errorf("--refetch without --state: exit %d, stderr %q; want 2 and a usage error", r.code, r.stderr)
	}
}

// recrawlRun runs magpie crawl over state from start, with extra flags,
// and fails the test on an exit other than 0 or 1.
func recrawlRun(t *testing.T, start, state string, extra ...string) result {
	t.Helper()
	args := append([]string{"crawl", start, "--allow-loopback", "--state", state}, extra...)
	r := cli(t, "", args...)
	if r.code != 0 && r.code != 1 {
		t.Fatalf("magpie %v: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	return r
}

// Issue 40: a recrawl reports as gone only a page that was there. A link
// that answered 404 on the first crawl too is a failure both times: no
// "gone" item, not counted as gone. A page whose first fetch the server
// failed (a 503, a 304 to a request that carried no validator) is fetched
// again by the next recrawl, though the page linking to it answers 304 and
// so names no link, and is new once it answers.
func TestCLIRecrawlFailures(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	fixed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		ok := fixed
		mu.Unlock()
		switch {
		case r.URL.Path == "/":
			w.Header().Set("ETag", `"root"`)
			http.ServeContent(w, r, "", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
				strings.NewReader(`<a href="/a">a</a><a href="/missing">m</a><a href="/n">n</a><a href="/busy">b</a>`))
		case r.URL.Path == "/a":
			_, _ = w.Write([]byte("<title>a</title>"))
		case ok && (r.URL.Path == "/n" || r.URL.Path == "/busy"):
			_, _ = w.Write([]byte("<title>here now</title>"))
		case r.URL.Path == "/n":
			w.WriteHeader(http.StatusNotModified)
		case r.URL.Path == "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	state := filepath.Join(t.TempDir(), "st.db")
	hitsOf := func(paths ...string) []int {
		mu.Lock()
		defer mu.Unlock()
		var n []int
		for _, p := range paths {
			n = append(n, hits[p])
		}
		return n
	}

	first := recrawlRun(t, srv.URL+"/", state, "-o", "-", "--retries", "0")
	wantChanges(t, "first crawl", changesOf(t, first, srv.URL), map[string]string{"/": "new", "/a": "new"})

	second := recrawlRun(t, srv.URL+"/", state, "-o", "-", "--retries", "0", "--revisit-after", "0")
	wantChanges(t, "second crawl", changesOf(t, second, srv.URL), map[string]string{"/": "unchanged", "/a": "unchanged"})
	if !strings.Contains(second.stderr, "recrawl: 0 new, 0 changed, 2 unchanged, 0 gone") {
		t.Errorf("second crawl: want 2 unchanged and 0 gone (/missing never existed), stderr:\n%s", second.stderr)
	}
	if n := hitsOf("/missing", "/n", "/busy"); n[0] != 2 || n[1] != 2 || n[2] != 2 {
		t.Errorf("after the second crawl /missing, /n (304 unasked) and /busy (503) were fetched %v times, want 2 each", n)
	}

	mu.Lock()
	fixed = true
	mu.Unlock()
	third := recrawlRun(t, srv.URL+"/", state, "-o", "-", "--retries", "0", "--revisit-after", "0")
	wantChanges(t, "third crawl", changesOf(t, third, srv.URL),
		map[string]string{"/": "unchanged", "/a": "unchanged", "/n": "new", "/busy": "new"})
}

// Issue 40: an item of a page that sent no body (a 304, or gone) has no
// title or links to report and leaves them out rather than writing "" and
// 0 as data; every revisited page has the depth its crawl found it at, not
// 1; and a CSV's header is the page record's whichever item comes first.
func TestCLIRecrawlItems(t *testing.T) {
	site := newEditableSite(t, map[string]string{
		"/":  `<title>home</title><a href="/a">a</a>`,
		"/a": `<title>a</title><a href="/b">b</a><a href="/c">c</a>`,
		"/b": "<title>b</title>", "/c": "<title>c</title>",
	})
	state := filepath.Join(t.TempDir(), "st.db")
	recrawlRun(t, site.URL+"/", state, "-o", "-")
	site.set("/b", "<title>b2</title>")
	site.set("/c", "")
	second := recrawlRun(t, site.URL+"/", state, "-o", "-", "--revisit-after", "0")
	want := map[string]map[string]any{
		"/":  {"status": 304.0, "depth": 1.0, "change": "unchanged"},
		"/a": {"status": 304.0, "depth": 2.0, "change": "unchanged"},
		"/b": {"status": 200.0, "depth": 3.0, "change": "changed", "title": "b2", "links": 0.0},
		"/c": {"status": 404.0, "depth": 3.0, "change": "gone"},
	}
	items := jsonLines(t, second.stdout)
	if len(items) != len(want) {
		t.Errorf("second crawl: %d items, want %d:\n%s", len(items), len(want), second.stdout)
	}
	for _, it := range items {
		u, _ := it["url"].(string)
		w, ok := want[strings.TrimPrefix(u, site.URL)]
		if !ok {
			t.Errorf("unexpected item %v", it)
			continue
		}
		for k, v := range it {
			if k != "url" && w[k] != v {
				t.Errorf("item %s: %s = %v, want %v (item %v)", u, k, v, w[k], it)
			}
		}
		for k := range w {
			if _, ok := it[k]; !ok {
				t.Errorf("item %s lacks %s: %v", u, k, it)
			}
		}
	}

	// CSV: the header is fixed, the bodiless pages' title and links cells
	// are empty.
	site.set("/b", "<title>b3</title>")
	out := filepath.Join(t.TempDir(), "pages.csv")
	recrawlRun(t, site.URL+"/", state, "-o", out, "--revisit-after", "0")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("CSV %q: %v", data, err)
	}
	if h := strings.Join(rows[0], ","); h != "url,status,title,depth,links,change" {
		t.Errorf("CSV header %q, want url,status,title,depth,links,change", h)
	}
	wantRows := map[string]string{
		"/": "304,,1,,unchanged", "/a": "304,,2,,unchanged", "/b": "200,b3,3,0,changed", "/c": "404,,3,,gone",
	}
	for _, row := range rows[1:] {
		p := strings.TrimPrefix(row[0], site.URL)
		if got := strings.Join(row[1:], ","); got != wantRows[p] {
			t.Errorf("CSV row %s: %q, want %q", p, got, wantRows[p])
		}
		delete(wantRows, p)
	}
	if len(wantRows) > 0 {
		t.Errorf("CSV lacks rows for %v:\n%s", wantRows, data)
	}

	// A start URL is at depth 1, wherever an earlier crawl found it.
	fromA := recrawlRun(t, site.URL+"/a", state, "-o", "-", "--revisit-after", "0")
	for _, it := range jsonLines(t, fromA.stdout) {
		if it["url"] == site.URL+"/a" && it["depth"] != 1.0 {
			t.Errorf("recrawl from /a: its item %v, want depth 1", it)
		}
	}
}

// With --field, a recrawl's items carry the change too, and every revisited
// page is an item: a 304 and a gone page (no body, so no fields) give their
// URL and change, their fields left out (empty cells in a CSV under the
// fixed header). A field named "change" is a usage error with --state.
func TestCLIRecrawlFieldItems(t *testing.T) {
	site := newEditableSite(t, map[string]string{
		"/":  `<title>home</title><h1>Home</h1><a href="/a">a</a><a href="/b">b</a>`,
		"/a": `<title>a</title><h1>A</h1>`,
		"/b": `<title>b</title><h1>B</h1>`,
	})
	state := filepath.Join(t.TempDir(), "st.db")
	first := recrawlRun(t, site.URL+"/", state, "-o", "-", "--field", "head=h1")
	for _, it := range jsonLines(t, first.stdout) {
		if it["change"] != "new" || it["head"] == nil {
			t.Errorf("first crawl item %v, want its head and change new", it)
		}
	}
	site.set("/a", `<title>a</title><h1>A2</h1>`)
	site.set("/b", "")
	second := recrawlRun(t, site.URL+"/", state, "-o", "-", "--field", "head=h1", "--revisit-after", "0")
	want := map[string]map[string]any{
		"/":  {"change": "unchanged"},
		"/a": {"head": "A2", "change": "changed"},
		"/b": {"change": "gone"},
	}
	items := jsonLines(t, second.stdout)
	if len(items) != len(want) {
		t.Errorf("second crawl: %d items, want %d:\n%s", len(items), len(want), second.stdout)
	}
	for _, it := range items {
		u, _ := it["url"].(string)
		w, ok := want[strings.TrimPrefix(u, site.URL)]
		if !ok {
			t.Errorf("unexpected item %v", it)
			continue
		}
		if len(it) != len(w)+1 {
			t.Errorf("item %s has keys %v, want url and %v", u, it, w)
		}
		for k, v := range w {
			if it[k] != v {
				t.Errorf("item %s: %s = %v, want %v (item %v)", u, k, it[k], v, it)
			}
		}
	}

	out := filepath.Join(t.TempDir(), "pages.csv")
	site.set("/a", `<title>a</title><h1>A3</h1>`)
	recrawlRun(t, site.URL+"/", state, "-o", out, "--field", "head=h1", "--revisit-after", "0")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("CSV %q: %v", data, err)
	}
	if h := strings.Join(rows[0], ","); h != "url,head,change" {
		t.Errorf("CSV header %q, want url,head,change", h)
	}
	wantRows := map[string]string{"/": ",unchanged", "/a": "A3,changed", "/b": ",gone"}
	for _, row := range rows[1:] {
		p := strings.TrimPrefix(row[0], site.URL)
		if got := strings.Join(row[1:], ","); got != wantRows[p] {
			t.Errorf("CSV row %s: %q, want %q", p, got, wantRows[p])
		}
		delete(wantRows, p)
	}
	if len(wantRows) > 0 {
		t.Errorf("CSV lacks rows for %v:\n%s", wantRows, data)
	}

	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--state", state, "--field", "change=h1")
	if r.code != 2 || !strings.Contains(r.stderr, `"change" is taken`) {
		t.Errorf("--field change=h1 with --state: exit %d, want 2 naming the clash; stderr:\n%s", r.code, r.stderr)
	}
}
