package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// failingSite serves / linking to /ok, /missing (404), /broken (500), /slow
// (answers only when the client gives up) and a page on tlsURL (a server
// with a self-signed certificate).
func failingSite(t *testing.T, tlsURL string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<title>home</title><a href="/ok">ok</a><a href="/missing">m</a><a href="/broken">b</a>
				<a href="/slow">s</a><a href="%s/secure">t</a>`, tlsURL)
		case "/ok":
			fmt.Fprint(w, `<title>ok</title>`)
		case "/broken":
			http.Error(w, "broken", http.StatusInternalServerError)
		case "/slow":
			<-r.Context().Done() // the client's --timeout ends it
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newTLSSite(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<title>secure %s</title>`, r.URL.Path)
	}))
	// The client's failed handshakes are logged by the server; not a failure.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// readFailures decodes an --errors file by URL.
func readFailures(t *testing.T, path string) map[string]failure {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]failure{}
	for line := range strings.Lines(string(data)) {
		var f failure
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("--errors line %q: %v", line, err)
		}
		if _, dup := out[f.URL]; dup {
			t.Errorf("%s logged twice", f.URL)
		}
		out[f.URL] = f
	}
	return out
}

// Issue 28 point 2: every failed request is named: --errors writes one JSON
// line each (url, status, kind, error, attempts, from), -v prints one line
// each on standard error, the summary counts timeouts as timeout and
// certificate failures as tls, and --include-failed writes the failed pages
// as items with their status.
func TestCLIFailuresNamed(t *testing.T) {
	secure := newTLSSite(t)
	site := failingSite(t, secure.URL)
	errPath := filepath.Join(t.TempDir(), "errors.jsonl")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--timeout", "500ms", "--retries", "1",
		"--errors", errPath, "-v", "--include-failed")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	home := site.URL + "/"
	want := map[string]failure{
		site.URL + "/missing":      {Status: 404, Kind: "http", Attempts: 1},
		site.URL + "/broken":       {Status: 500, Kind: "http", Attempts: 2},
		site.URL + "/slow":         {Status: 0, Kind: "timeout", Attempts: 2},
		secure.URL + "/secure":     {Status: 0, Kind: "tls", Attempts: 1},
		secure.URL + "/robots.txt": {}, // never a page: must not be logged
	}
	got := readFailures(t, errPath)
	for u, w := range want {
		g, ok := got[u]
		if w.Kind == "" {
			if ok {
				t.Errorf("--errors logs %s: %+v", u, g)
			}
			continue
		}
		if !ok {
			t.Errorf("--errors lacks %s; got %v", u, got)
			continue
		}
		if g.Status != w.Status || g.Kind != w.Kind || g.Attempts != w.Attempts || g.From != home || g.Error == "" {
			t.Errorf("--errors %s = %+v, want status %d, kind %s, attempts %d, from %s and a message", u, g, w.Status, w.Kind, w.Attempts, home)
		}
	}
	if len(got) != 4 {
		t.Errorf("--errors has %d lines, want 4: %v", len(got), got)
	}
	if g := got[secure.URL+"/secure"]; !strings.Contains(g.Error, "certificate") || strings.Contains(g.Error, secure.URL+"/secure") {
		t.Errorf("tls error message = %q, want the certificate's problem without the URL repeated", g.Error)
	}

	// -v: one line per failure, kind and status, URL, the page linking to it.
	for _, line := range []string{
		"failed: http 404: " + site.URL + "/missing (from " + home + ")\n",
		"failed: http 500: " + site.URL + "/broken (from " + home + ")\n",
	} {
		if !strings.Contains(r.stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, r.stderr)
		}
	}
	for _, re := range []string{
		`(?m)^failed: timeout: ` + regexp.QuoteMeta(site.URL+"/slow (from "+home+"): ") + `.+$`,
		`(?m)^failed: tls: ` + regexp.QuoteMeta(secure.URL+"/secure (from "+home+"): ") + `.*certificate.*$`,
		`(?m)^failed: 4$`, `(?m)^  timeout\s+1$`, `(?m)^  tls\s+1$`, `(?m)^  http 404\s+1$`, `(?m)^  http 500\s+1$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, r.stderr)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^failed: [^:]+: `).FindAllString(r.stderr, -1)); n != 4 {
		t.Errorf("%d \"failed: \" lines, want 4 (one per failed request):\n%s", n, r.stderr)
	}

	// --include-failed: every URL tried is an item, with its status.
	status := map[string]float64{}
	for _, it := range jsonLines(t, r.stdout) {
		status[it["url"].(string)] = it["status"].(float64)
	}
	wantItems := map[string]float64{
		home: 200, site.URL + "/ok": 200, site.URL + "/missing": 404, site.URL + "/broken": 500,
		site.URL + "/slow": 0, secure.URL + "/secure": 0,
	}
	if fmt.Sprint(status) != fmt.Sprint(wantItems) {
		t.Errorf("items by status = %v, want %v", status, wantItems)
	}
}

// Without --include-failed the output holds only the pages fetched, and
// without -v no failure line is printed; --errors alone still logs.
func TestCLIFailuresQuietByDefault(t *testing.T) {
	secure := newTLSSite(t)
	site := failingSite(t, secure.URL)
	errPath := filepath.Join(t.TempDir(), "errors.jsonl")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "--timeout", "500ms", "--retries", "0", "--errors", errPath)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "failed: http") {
		t.Errorf("failure lines printed without -v:\n%s", r.stderr)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for u := range urlsOf(jsonLines(t, r.stdout)) {
			yield(u)
		}
	})
	if want := []string{site.URL + "/", site.URL + "/ok"}; !slices.Equal(got, want) {
		t.Errorf("items %q, want %q", got, want)
	}
	if n := len(readFailures(t, errPath)); n != 4 {
		t.Errorf("--errors has %d lines, want 4", n)
	}
}

// With --field, --include-failed adds status, kind and error columns
// (last), so that failed pages are told apart in a CSV.
func TestCLIIncludeFailedWithFields(t *testing.T) {
	site := failingSite(t, "http://127.0.0.1:1")
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--timeout", "300ms", "--retries", "0",
		"--include-failed", "--field", "title=title", "--format", "csv", "--exclude", "/slow|:1/")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	slices.Sort(lines[1:])
	// Issue 40 point 12: and the failure's kind and error.
	want := []string{
		"url,title,status,kind,error",
		site.URL + "/,home,200,,",
		site.URL + "/broken,,500,http,Internal Server Error",
		site.URL + "/missing,,404,http,Not Found",
		site.URL + "/ok,ok,200,,",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("CSV:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// The --errors file cannot be created: a failure before any request.
func TestCLIErrorsFileUnwritable(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--errors", filepath.Join(t.TempDir(), "no", "such", "dir", "e.jsonl"))
	if r.code != 1 || !strings.Contains(r.stderr, "--errors") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 naming --errors", r.code, r.stderr)
	}
	if site.hitCount("/") != 0 {
		t.Error("the crawl started although --errors could not be written")
	}
}

// Issue 28 point 2: the kinds of errors, a timeout first of all.
func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		stopping bool
		want     string
	}{
		{"client timeout", &timeoutErr{}, false, "timeout"},
		{"client timeout, crawl ending", &timeoutErr{}, true, "cancelled"},
		{"x509 in url.Error", fmt.Errorf("Get: %w", &tlsCertErr), false, "tls"},
		{"redirect out of scope", fmt.Errorf("Not following redirect: %w", &scopeError{host: "x", mode: "host"}), false, "scope"},
	} {
		if got := errorKind(tc.err, tc.stopping); got != tc.want {
			t.Errorf("%s: errorKind(%v, %v) = %q, want %q", tc.name, tc.err, tc.stopping, got, tc.want)
		}
	}
}

// timeoutErr is like net/http's client timeout: a net.Error whose Timeout
// is true and which errors.Is context.DeadlineExceeded.
type timeoutErr struct{}

func (*timeoutErr) Error() string        { return "Client.Timeout exceeded" }
func (*timeoutErr) Timeout() bool        { return true }
func (*timeoutErr) Temporary() bool      { return true }
func (*timeoutErr) Is(target error) bool { return target == context.DeadlineExceeded }

var tlsCertErr = tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
