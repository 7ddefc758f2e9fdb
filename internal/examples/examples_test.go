package examples_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// expectation is what one example must print (stdout and stderr together).
type expectation struct {
	// want are patterns the output must match.
	want []string
	// reject are patterns it must not match.
	reject []string
	// env names variables the example needs; without them it is skipped
	// locally, and fails in CI (CI=true).
	env []string
	// browser marks an example that needs Chromium (or Chrome) on PATH:
	// without one it is skipped locally, and fails when
	// MAGPIE_REQUIRE_CHROMIUM=1 (as .ci/run sets).
	browser bool
	// site, when set, is served on loopback and its URL given as the
	// example's one argument (an example that crawls the URL it is given,
	// rather than a local site of its own).
	site map[string]string
}

var examples = map[string]expectation{
	"basic": {want: []string{`visiting http://127\.0\.0\.1:\d+/page/30\n`, `link found: "A broken link" -> /missing`}, reject: []string{`visiting https://example\.com`}},
	"error_handling": {want: []string{`ok +200 http://127\.0\.0\.1:\d+/page/1\n`, `error  HTTP 404 for .*/missing`, `error  HTTP 500 for .*/fail`,
		`refused robots\.txt forbids .*/private/stats\n`, `refused http://127\.0\.0\.1:\d+/page/1 was already visited\n`, `refused unsupported URL scheme: scheme "ftp"`}},
	"login":        {want: []string{`members' page says: The members' secret is: magpies collect shiny things\.`}},
	"max_depth":    {want: []string{`depth 1: .*/page/1\n`, `depth 2: .*/page/3\n`}, reject: []string{`depth 3`}},
	"parallel":     {want: []string{`scraped .*/page/2\n`, `Requests made: \d+`}},
	"queue":        {want: []string{`depth 1 .*/page/1\n`, `depth 3 `}, reject: []string{`depth 4`, `example\.com`}},
	"random_delay": {want: []string{`\+ *\d+ms http://127\.0\.0\.1:\d+/page/8\n`, `\[\d{6}\] \d+ \[ *\d+ - request\]`}},
	"rate_limit":   {want: []string{`s start /page/7\n`, `\[\d{6}\] \d+ \[ *\d+ - response\]`}, reject: []string{`- request\] .*url="https://example\.com`}},
	"request_context": {want: []string{
		`got /page/1, requested as http://127\.0\.0\.1:\d+/page/1, found on \(start\)\n`,
		// /page/3 is linked from /page/1 and /page/2, whichever is analyzed first.
		`got /page/2, requested as http://127\.0\.0\.1:\d+/page/2, found on /page/1\n`,
		`got /page/3, requested as http://127\.0\.0\.1:\d+/page/3, found on /page/[12]\n`,
	}},
	"items": {want: []string{`items: 4 written, 2 dropped, 0 failed\n`, `sku,name,price,page\n`, `S1,"Socks, wool, ""warm""",7,/page/2\n`},
		reject: []string{`X1`}},
	"metrics": {want: []string{`magpie_requests_total 31\n`, `magpie_items_total\{outcome="scraped"\} 30\n`, `msg=progress pages=`,
		`requests 31, responses 31`}},
	"stream_html":    {want: []string{`http://127\.0\.0\.1:\d+/page/28: Page 28\n`, `31 pages streamed, 0 parsed whole\n`}},
	"reuse_body":     {want: []string{`[0-9a-f]{16}  http://127\.0\.0\.1:\d+/page/28\n`, `31 pages; the largest, \d+ bytes, kept as a copy\n`}},
	"local_files":    {want: []string{`apples\.html: Apples\n`, `plums\.html: Plums\n`, `pages: 4\n`}},
	"url_filter":     {want: []string{`visited /page/5\n`, `pages visited: 6\n`}, reject: []string{`visited /page/6`, `/private`}},
	"multipart":      {want: []string{`200 from http://127\.0\.0\.1:\d+/upload:`, `field name = "magpie"`}},
	"proxy_switcher": {want: []string{`/page/\d+ via http://127\.0\.0\.1:\d+ \(proxy-A\)`, `/page/\d+ via http://127\.0\.0\.1:\d+ \(proxy-B\)`}},
	"scraper_server": {want: []string{`"status": 200`, `"http://127\.0\.0\.1:\d+/page/3"`}},
	"sitemap":        {want: []string{`/product/sneakers: sneakers\n`, `/product/beret: beret\n`, `pages: 6\n`}, reject: []string{`error:`}},
	"sqlite_resume":  {want: []string{`total: 30 distinct pages of 30, 0 fetched more than once`}},
	"redis_backend":  {want: []string{`all workers done; the shared queue is empty`}, env: []string{"MAGPIE_REDIS_ADDR"}},
	"quickstart": {site: map[string]string{
		"/":       `<title>Home</title><a href="/a">a</a><a href="/b">b</a><a href="https://example.com/">away</a>`,
		"/a":      `<title>Page A</title><a href="/deeper">deeper</a>`,
		"/b":      `<title>Page B</title>`,
		"/deeper": `<title>Too deep</title>`,
	}, want: []string{`http://127\.0\.0\.1:\d+/a Page A\n`, `/b Page B\n`, `Requests made: 3 \(3 responses\)`}, reject: []string{`Too deep`, `example\.com`}},
	"javascript": {want: []string{`rendered 200 /catalogue\n`, `product: Blue kettle\n`, `product: Oak spoon\n`, `http +200 /product/1\n`,
		`price of 1: 110\.50 EUR\n`}, reject: []string{`error:`, `rendered 200 /product`}, browser: true},
}

// haveBrowser reports whether a browser the render package finds is on PATH.
func haveBrowser() bool {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if _, err := exec.LookPath(name); err == nil {
			return true
		}
	}
	return false
}

// TestExamplesRun builds every example and runs it without arguments, which
// makes each serve and crawl its own local site.
func TestExamplesRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "_examples", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, d := range dirs {
		name := filepath.Base(filepath.Dir(d))
		if _, ok := examples[name]; !ok {
			t.Errorf("_examples/%s has no expectation in examples_test.go", name)
			continue
		}
		pkgs = append(pkgs, "./_examples/"+name)
	}
	for name := range examples {
		if _, err := os.Stat(filepath.Join(root, "_examples", name, "main.go")); err != nil {
			t.Errorf("expectation for _examples/%s, which does not exist", name)
		}
	}
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-o", bin + string(filepath.Separator)}, pkgs...)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the examples: %v\n%s", err, out)
	}

	for _, pkg := range pkgs {
		name := filepath.Base(pkg)
		exp := examples[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, v := range exp.env {
				if os.Getenv(v) == "" {
					if os.Getenv("CI") != "" {
						t.Fatalf("%s is not set in CI", v)
					}
					t.Skipf("%s not set; .ci/run sets it", v)
				}
			}
			if exp.browser && !haveBrowser() {
				if os.Getenv("MAGPIE_REQUIRE_CHROMIUM") == "1" {
					t.Fatal("MAGPIE_REQUIRE_CHROMIUM=1 but no chromium on PATH")
				}
				t.Skip("no chromium on PATH; .ci/run installs it")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var args []string
			if exp.site != nil {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					page, ok := exp.site[r.URL.Path]
					if !ok {
						http.NotFound(w, r)
						return
					}
					w.Header().Set("Content-Type", "text/html")
					_, _ = io.WriteString(w, page)
				}))
				defer srv.Close()
				args = append(args, srv.URL+"/")
			}
			cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out)
			}
			for _, w := range exp.want {
				if !regexp.MustCompile(w).Match(out) {
					t.Errorf("%s output does not match %q:\n%s", name, w, tail(out))
				}
			}
			for _, r := range exp.reject {
				if regexp.MustCompile(r).Match(out) {
					t.Errorf("%s output matches %q, which it must not:\n%s", name, r, tail(out))
				}
			}
		})
	}
}

// tail keeps failure messages readable.
func tail(out []byte) string {
	s := string(out)
	if lines := strings.Split(s, "\n"); len(lines) > 60 {
		s = "...\n" + strings.Join(lines[len(lines)-60:], "\n")
	}
	return s
}
