package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The embedded site has 40 HTML pages; /private/ is disallowed by robots.txt,
// four links are broken, one points to another domain and one is mailto:.
const (
	sitePages = 39
)

func TestDemo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"demo", "-latency", "0"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("run(demo) = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if strings.ContainsAny(stderr.String(), "\r\x1b") {
		t.Errorf("demo progress to a non-terminal holds carriage returns or escapes:\n%q", stderr.String())
	}
	if want := "demo: 39 pages crawled"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout = %q, want it to contain %q; stderr:\n%s", stdout.String(), want, stderr.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`http 404\s+4\n`),
		regexp.MustCompile(`blocked by robots\.txt\s+1\n`),
		regexp.MustCompile(`crawled 39 pages in`),
		regexp.MustCompile(`not http \(skipped\)\s+1\n`),
	} {
		if !want.MatchString(stderr.String()) {
			t.Errorf("stderr does not match %q:\n%s", want, stderr.String())
		}
	}
}

func TestCrawlWritesJSONLines(t *testing.T) {
	base, shutdown, err := serveSite(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown() })
	out := filepath.Join(t.TempDir(), "out.jsonl")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"crawl", base, "-depth", "2", "-parallel", "2", "-allow-loopback", "-o", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("run(crawl) = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]pageRecord{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p pageRecord
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if _, dup := seen[p.URL]; dup {
			t.Errorf("page %s written twice", p.URL)
		}
		seen[p.URL] = p
	}
	// Depth 2: the home page and the 12 pages it links to (5 shelves, 4 picks, 3 nav pages, minus home itself).
	home, ok := seen[base]
	if !ok {
		t.Fatalf("home page %s missing from output %v", base, seen)
	}
	if home.Depth != 1 || home.Status != 200 || home.Title != "Welcome | Magpie Books" || home.Links == 0 {
		t.Errorf("home record = %+v, want depth 1, status 200, title %q, links > 0", home, "Welcome | Magpie Books")
	}
	for u, p := range seen {
		if p.Depth > 2 {
			t.Errorf("%s has depth %d, want <= 2", u, p.Depth)
		}
		if strings.Contains(u, "/private/") {
			t.Errorf("%s crawled despite robots.txt", u)
		}
	}
	if len(seen) < 10 || len(seen) >= sitePages {
		t.Errorf("crawled %d pages at depth 2, want between 10 and %d", len(seen), sitePages-1)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"crawl"}, {"crawl", "ftp://x/"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code == 0 {
			t.Errorf("run(%q) = 0, want non-zero", args)
		}
	}
}

// TestCrawlRefusesLoopbackByDefault: magpie crawl guards against private
// networks unless -allow-loopback is given.
func TestCrawlRefusesLoopbackByDefault(t *testing.T) {
	base, shutdown, err := serveSite(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown() })
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"crawl", base, "-depth", "1"}, strings.NewReader(""), &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "private network") {
		t.Errorf("run(crawl loopback) = %d, stderr %q; want a failure naming the private network", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("pages written: %q, want none", stdout.String())
	}
}

// TestCrawlExtractsFieldsInEachFormat: -field and -follow build one item per
// page, written as JSON lines, CSV or a JSON array by the -o extension.
func TestCrawlExtractsFieldsInEachFormat(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<h1>Shop</h1><nav><a class=p href="/p/1">1</a><a class=p href="/p/2">2</a></nav><a href="/skip">not followed</a>`)
		case "/p/1":
			fmt.Fprint(w, `<h1>Boots, "red"</h1><span class=price>10</span><img src="/b.png">`)
		case "/p/2":
			fmt.Fprint(w, "<h1>Hat\nwide</h1><span class=price>5</span>")
		default:
			fmt.Fprint(w, `<h1>should not be crawled</h1>`)
		}
	}))
	defer site.Close()
	// img@src is a URL: absolute (issue 28 §5); absent, it stays empty.
	want := map[string]map[string]string{
		site.URL + "/":    {"title": "Shop", "price": "", "img": ""},
		site.URL + "/p/1": {"title": `Boots, "red"`, "price": "10", "img": site.URL + "/b.png"},
		site.URL + "/p/2": {"title": "Hat\nwide", "price": "5", "img": ""},
	}
	for _, ext := range []string{".jsonl", ".csv", ".json"} {
		t.Run(ext, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "items"+ext)
			var stdout, stderr bytes.Buffer
			args := []string{"crawl", site.URL + "/", "-allow-loopback", "-follow", "a.p", "-field", "title=h1",
				"-field", "price=.price", "-field", "img=img@src", "-o", out}
			if code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("run = %d; stderr:\n%s", code, stderr.String())
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]string{}
			switch ext {
			case ".jsonl":
				for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					var m map[string]string
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Fatalf("line %q: %v", line, err)
					}
					got[m["url"]] = m
				}
			case ".json":
				var ms []map[string]string
				if err := json.Unmarshal(data, &ms); err != nil {
					t.Fatalf("%q: %v", data, err)
				}
				for _, m := range ms {
					got[m["url"]] = m
				}
			case ".csv":
				rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				for _, row := range rows[1:] {
					m := map[string]string{}
					for i, k := range rows[0] {
						m[k] = row[i]
					}
					got[m["url"]] = m
				}
			}
			if len(got) != len(want) {
				t.Fatalf("items for %d pages, want %d: %v", len(got), len(want), got)
			}
			for u, w := range want {
				for k, v := range w {
					if got[u][k] != v {
						t.Errorf("%s %s = %q, want %q", u, k, got[u][k], v)
					}
				}
			}
		})
	}
}

// TestCrawlServesMetrics: -metrics serves the crawl's Prometheus metrics
// while it runs (the site asks for them before answering its page).
func TestCrawlServesMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var metrics string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			res, err := http.Get("http://" + addr + "/metrics")
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				metrics = string(b)
			}
		}
		fmt.Fprint(w, "<title>t</title>")
	}))
	defer site.Close()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"crawl", site.URL + "/", "-allow-loopback", "-metrics", addr}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(metrics, "magpie_requests_total 1") {
		t.Errorf("metrics during the crawl = %q, want magpie_requests_total 1", metrics)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the metrics server still answers after the crawl")
	}
}
