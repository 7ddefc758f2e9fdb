package main

import (
	"net/http"
	"net/http/httptest"
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
