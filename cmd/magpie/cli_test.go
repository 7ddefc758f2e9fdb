package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// Issue 19 points 2 and 3: a crawl that cannot start leaves an existing
// output file exactly as it was (content, mode, no temporary file beside it),
// exits 1 and prints the cause, naming the start URL.
func TestCLIFailedStartKeepsOutputAndFails(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	site := newPagesSite(t, 2, nil)
	notFound := site.URL + "/missing"
	for _, tc := range []struct {
		name  string
		args  []string
		start string
		want  []string // in stderr
	}{
		{"metrics address in use", []string{site.URL + "/", "--metrics", busy.Addr().String()}, "", []string{"--metrics", "address already in use"}},
		{"connection refused", []string{"http://127.0.0.1:1/", "--ignore-robots"}, "http://127.0.0.1:1/", []string{"connection refused", "giving up after 3 attempts"}},
		// The host is down: robots.txt cannot be read either (today refused
		// as unavailable after its retries; OnError at once once the
		// library reports a down host directly).
		{"connection refused, robots.txt obeyed", []string{"http://127.0.0.1:1/"}, "http://127.0.0.1:1/", []string{"connection refused"}},
		{"start page 404", []string{notFound}, notFound, []string{"404"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			keep := filepath.Join(dir, "keep.jsonl")
			if err := os.WriteFile(keep, []byte("{\"old\":1}\n"), 0o640); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"crawl", "--allow-loopback", "-q", "-o", keep}, tc.args...)
			r := cli(t, "", args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if tc.start != "" && !strings.Contains(r.stderr, "start URL "+tc.start) {
				t.Errorf("stderr does not name the start URL %s:\n%s", tc.start, r.stderr)
			}
			data, err := os.ReadFile(keep)
			if err != nil || string(data) != "{\"old\":1}\n" {
				t.Errorf("keep.jsonl = %q (%v), want it untouched", data, err)
			}
			if st, err := os.Stat(keep); err != nil || st.Mode().Perm() != 0o640 {
				t.Errorf("keep.jsonl mode = %v (%v), want 0640", st.Mode().Perm(), err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("files beside keep.jsonl: %v, want none", entries)
			}
		})
	}
}

// Issue 19 point 3: with several start URLs, any that fails makes the crawl
// fail, named; the others are still crawled and written.
func TestCLIOneStartURLFails(t *testing.T) {
	site := newPagesSite(t, 2, nil)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	r := cli(t, "", "crawl", site.URL+"/", site.URL+"/p/7", "--allow-loopback", "-q", "-o", out)
	if r.code != 1 {
		t.Errorf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	if want := "start URL " + site.URL + "/p/7: "; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "404") {
		t.Errorf("stderr does not name %q with its 404:\n%s", want, r.stderr)
	}
	if strings.Contains(r.stderr, "start URL "+site.URL+"/:") {
		t.Errorf("stderr blames the good start URL:\n%s", r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	wantPages(t, jsonLines(t, string(data)), site.URL, 2)
}

// Issue 19 point 7: the loopback refusal says which flag lifts it.
func TestCLILoopbackRefusalNamesTheFlag(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	r := cli(t, "", "crawl", site.URL+"/", "--ignore-robots", "-q")
	if r.code != 1 || !strings.Contains(r.stderr, "--allow-loopback") || !strings.Contains(r.stderr, "private network") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and a hint naming --allow-loopback", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
}

// Issue 19 point 4: flags after the URL count whatever comes first, every
// URL is crawled, -h and --version exit 0 on stdout, usage errors exit 2.
func TestCLIArguments(t *testing.T) {
	a := newPagesSite(t, 2, nil)
	b := newPagesSite(t, 1, nil)
	t.Run("flags before and after the URLs", func(t *testing.T) {
		r := cli(t, "", "crawl", "-q", a.URL+"/", "--allow-loopback", b.URL+"/", "-depth", "1", "--format=json")
		if r.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		var items []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
			t.Fatalf("stdout is not a JSON array (--format after the URL ignored?): %v\n%s", err, r.stdout)
		}
		got := urlsOf(items)
		if len(items) != 2 || got[a.URL+"/"] != 1 || got[b.URL+"/"] != 1 {
			t.Errorf("items %v, want both start pages once (depth 1)", got)
		}
	})
	t.Run("-h", func(t *testing.T) {
		for _, args := range [][]string{{"-h"}, {"--help"}, {"crawl", "-h"}, {"crawl", "--help"}, {"help", "crawl"}} {
			r := cli(t, "", args...)
			if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage:") {
				t.Errorf("magpie %q: exit %d, stdout %.80q, stderr %q; want help on stdout, exit 0", args, r.code, r.stdout, r.stderr)
			}
		}
		if r := cli(t, "", "crawl", "-h"); !strings.Contains(r.stdout, "--max-pages") || !strings.Contains(r.stdout, "-H, --header") {
			t.Errorf("crawl -h does not list the flags:\n%s", r.stdout)
		}
	})
	t.Run("--version", func(t *testing.T) {
		r := cli(t, "", "--version")
		if r.code != 0 || !regexp.MustCompile(`^magpie \S+.* go1\.\d+`).MatchString(r.stdout) {
			t.Errorf("--version: exit %d, stdout %q, want \"magpie VERSION … goX\"", r.code, r.stdout)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{{}, {"nope"}, {"crawl"}, {"crawl", "ftp://x/"}, {"crawl", "--no-such-flag", "http://x/"},
			{"crawl", "http://x/", "--scope", "planet"}, {"crawl", "http://x/", "--include", "("}, {"crawl", "http://x/", "-o", "out.txt"}} {
			r := cli(t, "", args...)
			if r.code != 2 || !strings.Contains(r.stderr, "magpie") {
				t.Errorf("magpie %q: exit %d, stderr %q; want 2 and a message", args, r.code, r.stderr)
			}
		}
	})
}

// Issue 19 point 5: retries are on by default: a server answering 429 to
// every third request (once per page) is crawled in full.
func TestCLIRetries429ByDefault(t *testing.T) {
	var mu sync.Mutex
	n := 0
	refused := map[string]bool{}
	site := newPagesSite(t, 14, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			tooMany := n%3 == 0 && !refused[r.URL.Path] && r.URL.Path != "/robots.txt"
			if tooMany {
				refused[r.URL.Path] = true
			}
			mu.Unlock()
			if tooMany {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	wantPages(t, jsonLines(t, r.stdout), site.URL, 14)
	mu.Lock()
	defer mu.Unlock()
	if len(refused) < 4 {
		t.Errorf("the server refused only %d requests with 429; the test needs several", len(refused))
	}
}

// Issue 19 point 7: -o - with --format csv writes CSV to standard output,
// the columns in --field order.
func TestCLICSVToStdoutInFieldOrder(t *testing.T) {
	site := newPagesSite(t, 2, nil)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "-o", "-", "--format", "csv",
		"--field", "zeta=title", "--field", "alpha=a@href", "--field", "mid=a")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil {
		t.Fatalf("stdout is not CSV: %v\n%s", err, r.stdout)
	}
	if want := []string{"url", "zeta", "alpha", "mid"}; len(rows) == 0 || !slices.Equal(rows[0], want) {
		t.Fatalf("header = %v, want %v", rows[0], want)
	}
	got := map[string][]string{}
	for _, row := range rows[1:] {
		got[row[0]] = row
	}
	// a@href is made absolute (issue 28 §5).
	if row := got[site.URL+"/p/1"]; !slices.Equal(row, []string{site.URL + "/p/1", "page 1", site.URL + "/p/0", "next"}) {
		t.Errorf("row of /p/1 = %q", row)
	}
	if len(rows) != 4 {
		t.Errorf("%d rows, want a header and 3 pages", len(rows))
	}
}

// Issue 19 point 7: the default depth is unlimited within the scope: a chain
// of 12 pages is crawled to its end.
func TestCLIDefaultDepthUnlimited(t *testing.T) {
	site := newPagesSite(t, 12, nil)
	// Follow only the "next" links, so that /p/11 is 13 levels down.
	r := cli(t, "", "crawl", site.URL+"/p/0", "--allow-loopback", "-q", "--follow", "a[href]:not([href='/p/0'])")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	items := jsonLines(t, r.stdout)
	if len(items) != 12 || urlsOf(items)[site.URL+"/p/11"] != 1 {
		t.Errorf("crawled %v, want the 12 pages of the chain", urlsOf(items))
	}
	for _, it := range items {
		if it["url"] == site.URL+"/p/11" && it["depth"] != 12.0 {
			t.Errorf("/p/11 at depth %v, want 12", it["depth"])
		}
	}
}

// Issue 19 point 6: --include, --exclude and --exclude-ext.
func TestCLIURLFilters(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<a href="/docs/a">a</a><a href="/docs/b.gz">gz</a><a href="/docs/c.PDF?x=1">pdf</a>
			<a href="/docs/old/d">old</a><a href="/blog/e">blog</a>`)
	})
	mux.HandleFunc("/docs/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<title>doc</title>") })
	mux.HandleFunc("/blog/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<title>blog</title>") })
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"none", nil, []string{"/", "/docs/a", "/docs/b.gz", "/docs/c.PDF?x=1", "/docs/old/d", "/blog/e"}},
		{"include", []string{"--include", "/docs/"}, []string{"/", "/docs/a", "/docs/b.gz", "/docs/c.PDF?x=1", "/docs/old/d"}},
		{"exclude", []string{"--exclude", "/old/", "--exclude", "blog"}, []string{"/", "/docs/a", "/docs/b.gz", "/docs/c.PDF?x=1"}},
		{"exclude-ext", []string{"--exclude-ext", "gz,.pdf"}, []string{"/", "/docs/a", "/docs/old/d", "/blog/e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"crawl", site.URL + "/", "--allow-loopback", "-q"}, tc.flags...)
			r := cli(t, "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			var got []string
			for u := range urlsOf(jsonLines(t, r.stdout)) {
				got = append(got, strings.TrimPrefix(u, site.URL))
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("crawled %q, want %q", got, want)
			}
		})
	}
}

// vhostProxy is an HTTP proxy that serves made-up hosts itself, so that a
// test can crawl several host names without DNS. It records the requests.
type vhostProxy struct {
	mu       sync.Mutex
	requests []*http.Request
}

func (p *vhostProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests = append(p.requests, r.Clone(r.Context()))
	p.mu.Unlock()
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	fmt.Fprintf(w, "<title>%s</title>", r.Host)
	if r.Host == "www.shop.test" && r.URL.Path == "/" {
		fmt.Fprint(w, `<a href="/a">a</a><a href="http://img.www.shop.test/b">b</a>
			<a href="http://blog.shop.test/c">c</a><a href="http://other.test/d">d</a>`)
	}
}

// Issue 19 point 6: --scope host, subdomains and domain; --proxy,
// --user-agent and --header reach the server.
func TestCLIScopeProxyAndHeaders(t *testing.T) {
	proxy := &vhostProxy{}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		scope string
		want  []string
	}{
		{"host", []string{"http://www.shop.test/", "http://www.shop.test/a"}},
		{"subdomains", []string{"http://www.shop.test/", "http://www.shop.test/a", "http://img.www.shop.test/b"}},
		{"domain", []string{"http://www.shop.test/", "http://www.shop.test/a", "http://img.www.shop.test/b", "http://blog.shop.test/c"}},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			r := cli(t, "", "crawl", "http://www.shop.test/", "--scope", tc.scope, "--proxy", srv.URL, "--allow-loopback", "-q",
				"-A", "test-agent/1.0", "-H", "X-Token: abc", "--header=Accept-Language: fr")
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			got := slices.Sorted(func(yield func(string) bool) {
				for u := range urlsOf(jsonLines(t, r.stdout)) {
					yield(u)
				}
			})
			if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Errorf("crawled %q, want %q", got, want)
			}
		})
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if len(proxy.requests) == 0 {
		t.Fatal("no request went through --proxy")
	}
	for _, r := range proxy.requests {
		if r.Host == "other.test" {
			t.Errorf("out-of-scope host fetched: %s", r.URL)
		}
		if r.URL.Path == "/robots.txt" {
			continue
		}
		if r.UserAgent() != "test-agent/1.0" || r.Header.Get("X-Token") != "abc" || r.Header.Get("Accept-Language") != "fr" {
			t.Errorf("%s sent with User-Agent %q, X-Token %q, Accept-Language %q", r.URL, r.UserAgent(), r.Header.Get("X-Token"), r.Header.Get("Accept-Language"))
		}
	}
}

// Issue 19 point 6: --max-pages and --max-duration bound the crawl; both
// end with status 0 and what was crawled written.
func TestCLIMaxPagesAndDuration(t *testing.T) {
	t.Run("max-pages", func(t *testing.T) {
		site := newPagesSite(t, 20, nil)
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--max-pages", "5", "--parallel", "1")
		if r.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		if items := jsonLines(t, r.stdout); len(items) != 5 {
			t.Errorf("%d pages written, want 5", len(items))
		}
	})
	t.Run("max-duration", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		site := newPagesSite(t, 5, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/p/3" { // never answers while the crawl runs
					select {
					case <-release:
					case <-r.Context().Done():
					}
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		out := filepath.Join(t.TempDir(), "out.csv")
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--max-duration", "2s", "--timeout", "0", "-o", out)
		if r.code != 0 || !strings.Contains(r.stderr, "stopped after --max-duration 2s") {
			t.Fatalf("exit %d, want 0 and a note; stderr:\n%s", r.code, r.stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		// The page that never answers kept the crawl going: --max-duration
		// ended it, and what was crawled before is written (how much of it
		// depends on the machine's speed; the start page at least).
		rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(rows) < 2 || rows[1][0] != site.URL+"/" {
			t.Fatalf("CSV rows %q (%v), want a header and the start page first", rows, err)
		}
		for _, row := range rows[1:] {
			if row[0] == site.URL+"/p/3" {
				t.Errorf("the page that never answered was written: %q", row)
			}
		}
	})
}

// Issue 19 point 6: --timeout bounds a request; with --retries 0 it is
// tried once.
func TestCLITimeoutAndRetries(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	site := newPagesSite(t, 1, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--timeout", "300ms", "--retries", "0")
	if r.code != 1 || !strings.Contains(r.stderr, "Client.Timeout") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and the timeout", r.code, r.stderr)
	}
	if n := site.hitCount("/"); n != 1 {
		t.Errorf("/ requested %d times with --retries 0, want 1", n)
	}
}

// Issue 19 point 6: start URLs from --list FILE and from standard input.
func TestCLIList(t *testing.T) {
	a := newPagesSite(t, 1, nil)
	b := newPagesSite(t, 1, nil)
	list := fmt.Sprintf("# start pages\n%s/\n\n%s/\n", a.URL, b.URL)
	file := filepath.Join(t.TempDir(), "urls.txt")
	if err := os.WriteFile(file, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"file":  {"--list", file},
		"stdin": {"-l", "-"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, list, append([]string{"crawl", "--allow-loopback", "-q"}, args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			got := urlsOf(jsonLines(t, r.stdout))
			for _, u := range []string{a.URL + "/", a.URL + "/p/0", b.URL + "/", b.URL + "/p/0"} {
				if got[u] != 1 {
					t.Errorf("%s written %d times, want once (got %v)", u, got[u], got)
				}
			}
		})
	}
}

// Issue 19 point 6: --config FILE sets flags; the command line wins.
func TestCLIConfigFile(t *testing.T) {
	site := newPagesSite(t, 3, nil)
	conf := filepath.Join(t.TempDir(), "magpie.conf")
	if err := os.WriteFile(conf, []byte("# crawl settings\ndepth 1\nallow-loopback\n--format=csv\nfield = title=title\nquiet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "crawl", site.URL+"/", "--config", conf)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if want := "url,title\n" + site.URL + "/,home\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q (depth 1, CSV, one field)", r.stdout, want)
	}
	r = cli(t, "", "crawl", site.URL+"/", "--config", conf, "--depth", "2", "--format", "jsonl")
	if items := jsonLines(t, r.stdout); r.code != 0 || len(items) != 4 {
		t.Errorf("exit %d, %d items; want the command line's depth 2 and JSON lines; stderr:\n%s", r.code, len(items), r.stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.conf")
	os.WriteFile(bad, []byte("dpth 2\n"), 0o644)
	if r := cli(t, "", "crawl", site.URL+"/", "--config", bad); r.code != 2 || !strings.Contains(r.stderr, `bad.conf:1: unknown flag "dpth"`) {
		t.Errorf("bad config: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Issue 19 point 6: robots.txt is obeyed unless --ignore-robots, and
// --sitemaps crawls the pages its Sitemap: lines list.
func TestCLIRobotsAndSitemaps(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "User-agent: *\nDisallow: /private\nSitemap: http://%s/map.xml\n", r.Host)
	})
	mux.HandleFunc("/map.xml", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://%s/orphan</loc></url></urlset>`, r.Host)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<title>%s</title><a href=/private>p</a>", r.URL.Path)
	})
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{"/"}},
		{[]string{"--ignore-robots"}, []string{"/", "/private"}},
		{[]string{"--sitemaps"}, []string{"/", "/orphan"}},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			r := cli(t, "", append([]string{"crawl", site.URL + "/", "--allow-loopback", "-q"}, tc.flags...)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if got := crawledPaths(t, r.stdout, site.URL); !slices.Equal(got, tc.want) {
				t.Errorf("crawled %q, want %q", got, tc.want)
			}
		})
	}
}

// Issue 19 point 6: --state FILE: a crawl interrupted (SIGINT) exits 130 and
// says it can resume; the same command again crawls the rest, appending to
// the JSON lines file, without starting over.
func TestCLIStateResume(t *testing.T) {
	const pages = 30
	site, reached, release := newHeldSite(t, pages)
	dir := t.TempDir()
	state, out := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "pages.jsonl")
	args := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "--state", state, "-o", out}

	cmd, stdout, stderr := startUntil(t, reached, args...)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	first := exitResult(t, cmd.Wait(), stdout, stderr)
	release()
	if first.code != 130 || !strings.Contains(first.stderr, "run the same command again to resume") {
		t.Fatalf("interrupted run: exit %d, want 130 and a note; stderr:\n%s", first.code, first.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the interrupted run wrote no file: %v", err)
	}
	firstItems := jsonLines(t, string(data))
	if len(firstItems) == 0 || len(firstItems) >= pages {
		t.Fatalf("interrupted run wrote %d pages, want some but not all", len(firstItems))
	}
	homeHits := site.hitCount("/")

	second := cli(t, "", args...)
	if second.code != 0 {
		t.Fatalf("resumed run: exit %d; stderr:\n%s", second.code, second.stderr)
	}
	data, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	wantPages(t, jsonLines(t, string(data)), site.URL, pages)
	if t.Failed() {
		t.Logf("first run: %d items; stderr:\n%s\nsecond run stderr:\n%s", len(firstItems), first.stderr, second.stderr)
	}
	if n := site.hitCount("/"); n != homeHits {
		t.Errorf("the resumed run fetched the start page again (%d times, was %d)", n, homeHits)
	}
	for i := range pages {
		p := "/p/" + strconv.Itoa(i)
		if n := site.hitCount(p); n > 1 && p != "/p/10" {
			t.Errorf("%s fetched %d times, want once", p, n)
		}
	}
}

// Issue 19 point 8: piped progress is plain lines, no carriage returns; the
// summary separates failures from skips.
func TestCLIProgressAndSummary(t *testing.T) {
	site := newPagesSite(t, 3, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/p/2" {
				http.Error(w, "gone", http.StatusGone)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-o", filepath.Join(t.TempDir(), "o.jsonl"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\r\x1b") {
		t.Errorf("stderr to a pipe holds carriage returns or escapes: %q", r.stderr)
	}
	for _, re := range []string{`crawled 3 pages in`, `(?m)^failed: 1\n  http 410\s+1$`, `(?m)^already visited: [1-9]\d* links \(not fetched again\)$`} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("summary does not match %s:\n%s", re, r.stderr)
		}
	}
	if regexp.MustCompile(`(?m)^skipped:`).MatchString(r.stderr) {
		t.Errorf("links to pages already visited are counted as skipped (issue 28 point 2):\n%s", r.stderr)
	}
}

// requireChromium skips the test when no browser is installed, or fails it
// when MAGPIE_REQUIRE_CHROMIUM=1 (as CI sets), as the render package's
// tests do.
func requireChromium(t *testing.T) {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if _, err := exec.LookPath(name); err == nil {
			return
		}
	}
	if os.Getenv("MAGPIE_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("MAGPIE_REQUIRE_CHROMIUM=1 but no chromium on PATH (install the chromium package)")
	}
	t.Skip("skipping: no chromium on PATH (install chromium to run the rendering tests)")
}

// Issue 19 point 6: --render loads pages in headless Chromium, so links
// that scripts add are followed.
func TestCLIRender(t *testing.T) {
	requireChromium(t)
	site := httptest.NewServer(scriptSite())
	t.Cleanup(site.Close)
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{"/"}},
		{[]string{"--render"}, []string{"/", "/from-script"}},
	} {
		t.Run(strings.Join(append([]string{"plain"}, tc.flags...), " "), func(t *testing.T) {
			cmd := cliCommand(t, "", append([]string{"crawl", site.URL + "/", "--allow-loopback", "-q"}, tc.flags...)...)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir()) // the browser profile goes away with the test
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			r := exitResult(t, cmd.Run(), &stdout, &stderr)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if got := crawledPaths(t, r.stdout, site.URL); !slices.Equal(got, tc.want) {
				t.Errorf("crawled %q, want %q", got, tc.want)
			}
		})
	}
}

// scriptSite serves "/", whose script adds a link to "/from-script": only
// a crawl that runs scripts finds the second page.
func scriptSite() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>home</title></head><body><script>
			var a = document.createElement("a"); a.href = "/from-script"; a.textContent = "js";
			document.body.appendChild(a);</script></body></html>`)
	})
	mux.HandleFunc("/from-script", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>made by script</title>`)
	})
	return mux
}

// Issue 19 point 8: a progress line fits the terminal: at 60 columns it
// stays under 60 characters, parts left out rather than wrapped.
func TestProgressLineFitsWidth(t *testing.T) {
	c := counts{pages: 123456, failed: map[string]int{"http 404": 4321}, skipped: map[string]int{"already visited (skipped)": 987654}}
	full := progressLine(c, &magpie.Stats{Pending: 5000}, 93*time.Second, 0)
	for _, want := range []string{"123456 pages", "4321 failed", "5000 queued", "987654 skipped", "pages/s", "93s"} {
		if !strings.Contains(full, want) {
			t.Errorf("progressLine() = %q, want it to contain %q", full, want)
		}
	}
	for _, width := range []int{200, 80, 60, 40, 20, 5, 1} {
		line := progressLine(c, &magpie.Stats{Pending: 5000}, 93*time.Second, width)
		if len(line) > max(width-1, 0) {
			t.Errorf("progressLine(width %d) = %q (%d chars), want at most %d", width, line, len(line), width-1)
		}
		if width >= 40 && (!strings.Contains(line, "123456 pages") || !strings.Contains(line, "4321 failed")) {
			t.Errorf("progressLine(width %d) = %q, want pages and failures kept", width, line)
		}
		if strings.ContainsAny(line, "\r\n") {
			t.Errorf("progressLine(width %d) = %q holds a line break", width, line)
		}
	}
	if got := progressLine(c, &magpie.Stats{Pending: 5000}, 93*time.Second, 200); got != full {
		t.Errorf("progressLine(width 200) = %q, want the full line %q", got, full)
	}
}

// Issue 19 point 8: progress to a writer that is not a terminal is one plain
// line per report, without carriage returns or escapes.
func TestProgressPlainWhenNotATerminal(t *testing.T) {
	buf := &syncBuffer{wrote: make(chan struct{}, 100)}
	live, _ := terminal(buf)
	if live {
		t.Fatal("a buffer was taken for a terminal")
	}
	tl := &tally{}
	tl.page()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		progress(ctx, buf, tl, time.Now(), time.Millisecond, live, nil, func() magpie.Stats { return magpie.Stats{Pending: 2} })
	}()
	deadline := time.After(time.Minute)
	for range 3 {
		select {
		case <-deadline:
			t.Fatal("no progress lines written")
		case <-buf.wrote:
		}
	}
	cancel()
	<-done
	out := buf.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("progress to a pipe = %q, want no carriage returns or escapes", out)
	}
	if !strings.HasPrefix(out, "  1 pages  0 failed  2 queued  0 skipped") {
		t.Errorf("progress line = %q", strings.SplitN(out, "\n", 2)[0])
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader; each
// write is announced on wrote when there is room.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Issue 19 point 8: on a real terminal (a pseudo-terminal made by script(1))
// of 50 columns the live progress line is rewritten in place and never
// wider than the terminal.
func TestCLILiveProgressFitsTerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("skipping: script(1) is not installed (util-linux)")
	}
	bin := magpieBinary(t)
	cmd := cliCommand(t, "")
	cmd.Path, cmd.Args = scriptBin, []string{"script", "-qec", "stty cols 50 rows 20; " + bin + " demo --latency 100ms", "/dev/null"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := exitResult(t, cmd.Run(), &stdout, &stderr)
	if r.code != 0 {
		t.Fatalf("exit %d; output:\n%s%s", r.code, r.stdout, r.stderr)
	}
	live := 0
	for _, seg := range strings.Split(strings.ReplaceAll(r.stdout, "\r\n", "\n"), "\r") {
		seg, _, _ = strings.Cut(seg, "\n")
		if !strings.Contains(seg, "pages") || strings.Contains(seg, "crawled") {
			continue
		}
		live++
		if seg = strings.ReplaceAll(seg, "\x1b[K", ""); len(seg) > 49 {
			t.Errorf("progress line %q is %d columns, want at most 49 on a 50-column terminal", seg, len(seg))
		}
	}
	if live == 0 {
		t.Errorf("no live progress line on the terminal:\n%q", r.stdout)
	}
}

// Issue 19 point 6, issue 28 §4: a resumed crawl (--state) adds to its CSV
// output, so the earlier runs' items are never lost: a CSV file it could not
// add to without losing some (not a complete export) is refused before any
// request, and left exactly as it was.
func TestCLIStateKeepsEarlierCSV(t *testing.T) {
	site, reached, release := newHeldSite(t, 20)
	dir := t.TempDir()
	state, out := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "items.csv")
	cmd, stdout, stderr := startUntil(t, reached, "crawl", site.URL+"/", "--allow-loopback", "--parallel", "1", "-q",
		"--state", state, "-o", filepath.Join(dir, "first.csv"))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if r := exitResult(t, cmd.Wait(), stdout, stderr); r.code != 130 {
		t.Fatalf("interrupted run: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	release()
	torn := "url,status\nhttp://example.test/,200\n\"http://example.test/a"
	if err := os.WriteFile(out, []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	hits := site.hitCount("/p/11")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--parallel", "1", "--state", state, "-o", out)
	if r.code != 2 || !strings.Contains(r.stderr, "not a complete csv export") {
		t.Errorf("exit %d, stderr %q; want 2 and why", r.code, r.stderr)
	}
	if data, _ := os.ReadFile(out); string(data) != torn {
		t.Errorf("items.csv = %q, want it untouched", data)
	}
	if n := site.hitCount("/p/11"); n != hits {
		t.Errorf("the refused run fetched /p/11 %d times", n-hits)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".items.csv*")); len(left) != 0 {
		t.Errorf("temporary files %q left beside items.csv", left)
	}
}

// A start URL that redirects is judged by where it lands: fetched there,
// the crawl succeeds; a 404 there fails it, naming the start URL.
func TestCLIStartURLRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/old", http.RedirectHandler("/home", http.StatusMovedPermanently))
	mux.Handle("/lost", http.RedirectHandler("/nowhere", http.StatusFound))
	mux.HandleFunc("/home", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<title>home</title>") })
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)

	r := cli(t, "", "crawl", site.URL+"/old", "--allow-loopback", "-q")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if got := urlsOf(jsonLines(t, r.stdout)); got[site.URL+"/home"] != 1 || len(got) != 1 {
		t.Errorf("crawled %v, want the redirect's target once", got)
	}
	r = cli(t, "", "crawl", site.URL+"/lost", "--allow-loopback", "-q")
	if r.code != 1 || !strings.Contains(r.stderr, "start URL "+site.URL+"/lost: ") || !strings.Contains(r.stderr, "404") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 naming %s/lost and its 404", r.code, r.stderr, site.URL)
	}
}

// Issue 19 point 9: the repository has a license and the README says how
// to install the command.
func TestLicenseAndInstallLine(t *testing.T) {
	license, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "Copyright 2026 The magpie authors"} {
		if !bytes.Contains(license, []byte(want)) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go install github.com/magpiecrawl/magpie/cmd/magpie@latest", "## Command line"} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}
