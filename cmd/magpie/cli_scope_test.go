package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// newTreeSite serves a small site of directories: /tutorial/ and below
// link up to their parents, to a sibling directory sharing its prefix
// (/tutorials/) and to /tutorial without the slash (a file at the root);
// /moved/ redirects to /tutorial/, and /tutorial/away to /other/.
func newTreeSite(t *testing.T) *httptest.Server {
	t.Helper()
	links := map[string][]string{
		"/":                    {"/tutorial/", "/other/"},
		"/tutorial/":           {"a.html", "sub/", "../", "/other/", "/tutorial", "/tutorials/x.html", "away", "?page=2"},
		"/tutorial/?page=2":    {"a.html"},
		"/tutorial/a.html":     {"sub/b.html", "../other/c.html", "/"},
		"/tutorial/sub/":       {"b.html", "../../"},
		"/tutorial/sub/b.html": {"../a.html"},
		"/tutorial/index.html": {"a.html", "/other/"},
		"/other/":              {"c.html"},
		"/other/c.html":        nil,
		"/tutorial":            nil,
		"/tutorials/x.html":    nil,
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved/":
			http.Redirect(w, r, "/tutorial/", http.StatusMovedPermanently)
			return
		case "/tutorial/away":
			http.Redirect(w, r, "/other/c.html", http.StatusFound)
			return
		}
		key := r.URL.Path
		if r.URL.RawQuery != "" {
			key += "?" + r.URL.RawQuery
		}
		ls, ok := links[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<title>%s</title>", key)
		for _, l := range ls {
			fmt.Fprintf(w, `<a href="%s">x</a>`, l)
		}
	}))
	t.Cleanup(site.Close)
	return site
}

// Issue 40 point 15: --no-parent, as wget -r --no-parent: from /tutorial/
// (or a page in it, or a start URL that lands there) the crawl never goes
// above /tutorial/, nor to a sibling sharing its prefix; a redirect out of
// it is refused and named.
func TestCLINoParent(t *testing.T) {
	site := newTreeSite(t)
	below := []string{"/tutorial/", "/tutorial/?page=2", "/tutorial/a.html", "/tutorial/sub/", "/tutorial/sub/b.html"}
	for _, tc := range []struct {
		start string
		flags []string
		want  []string
	}{
		{"/tutorial/", []string{"--no-parent"}, below},
		{"/tutorial/index.html", []string{"--no-parent"},
			[]string{"/tutorial/a.html", "/tutorial/index.html", "/tutorial/sub/b.html"}},
		{"/moved/", []string{"--no-parent"}, below},
		// Without the flag the whole site is crawled.
		{"/tutorial/", nil, []string{"/", "/other/", "/other/c.html", "/tutorial", "/tutorial/",
			"/tutorial/?page=2", "/tutorial/a.html", "/tutorial/sub/", "/tutorial/sub/b.html", "/tutorials/x.html"}},
	} {
		t.Run(tc.start+" "+strings.Join(tc.flags, " "), func(t *testing.T) {
			args := append([]string{"crawl", site.URL + tc.start, "--allow-loopback", "-q", "-v"}, tc.flags...)
			r := cli(t, "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			got := crawledPaths(t, r.stdout, site.URL)
			if tc.start == "/moved/" {
				got = slices.DeleteFunc(got, func(p string) bool { return p == "/moved/" })
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("crawled %q, want %q; stderr:\n%s", got, tc.want, r.stderr)
			}
			named := strings.Contains(r.stderr, "failed: scope: "+site.URL+"/tutorial/away (from "+site.URL+"/tutorial/): ") &&
				strings.Contains(r.stderr, site.URL+"/other/c.html is above the start URL's directory (--no-parent)")
			if tc.flags != nil && tc.start == "/tutorial/" && !named {
				t.Errorf("the redirect from /tutorial/away out of /tutorial/ is not named; stderr:\n%s", r.stderr)
			}
		})
	}
}
