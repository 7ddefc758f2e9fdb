package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The magpie binary the CLI tests run, built once on first use into binDir
// (removed by TestMain).
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// magpieBinary builds cmd/magpie (once per test binary) and returns its path.
func magpieBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "magpie-cli-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "magpie")
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		out, err := exec.Command(goBin, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary with args and stdin in a temporary directory, and
// waits for it (at most two minutes: a crawl that hangs fails the test
// instead of the whole run).
func cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := cliCommand(t, stdin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return exitResult(t, err, &stdout, &stderr)
}

func cliCommand(t *testing.T, stdin string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, magpieBinary(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

func exitResult(t *testing.T, err error, stdout, stderr *bytes.Buffer) result {
	t.Helper()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running magpie: %v; stderr:\n%s", err, r.stderr)
	}
	return r
}

// jsonLines decodes JSON lines into maps.
func jsonLines(t *testing.T, data string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// urlsOf returns the "url" of each item, as a set.
func urlsOf(items []map[string]any) map[string]int {
	set := map[string]int{}
	for _, it := range items {
		u, _ := it["url"].(string)
		set[u]++
	}
	return set
}

// pagesSite serves n pages /p/0 … /p/n-1 and /, where / links to every page
// (and each page to the next, so the links are found twice). It records the
// requests by path.
type pagesSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newPagesSite(t *testing.T, n int, wrap func(http.Handler) http.Handler) *pagesSite {
	t.Helper()
	s := &pagesSite{hits: map[string]int{}}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch {
		case r.URL.Path == "/":
			fmt.Fprint(w, "<title>home</title>")
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
		case strings.HasPrefix(r.URL.Path, "/p/"):
			var i int
			if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &i); err != nil || i < 0 || i >= n {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `<title>page %d</title><a href="/p/%d">next</a>`, i, (i+1)%n)
		default:
			http.NotFound(w, r)
		}
	})
	if wrap != nil {
		h = wrap(h)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *pagesSite) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// wantPages fails unless items hold exactly the home page and /p/0 … /p/n-1
// of base, each once.
func wantPages(t *testing.T, items []map[string]any, base string, n int) {
	t.Helper()
	got := urlsOf(items)
	want := []string{base + "/"}
	for i := range n {
		want = append(want, fmt.Sprintf("%s/p/%d", base, i))
	}
	for _, u := range want {
		if got[u] != 1 {
			t.Errorf("%s written %d times, want once", u, got[u])
		}
	}
	if len(items) != len(want) {
		t.Errorf("%d items written, want %d", len(items), len(want))
	}
}

// readAll reads r to the end (a FIFO's reader side).
func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// newHeldSite is newPagesSite whose /p/10 hangs until release is called
// (or its request ends); reached is closed when /p/10 is first asked for.
// A crawl with one download at a time is then stopped or killed there.
func newHeldSite(t *testing.T, pages int) (site *pagesSite, reached <-chan struct{}, release func()) {
	t.Helper()
	hold, hit := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	site = newPagesSite(t, pages, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/p/10" {
				once.Do(func() { close(hit) })
				select {
				case <-hold:
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	release = func() { released.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return site, hit, release
}

// startUntil starts magpie with args and returns once reached is closed.
func startUntil(t *testing.T, reached <-chan struct{}, args ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	cmd = cliCommand(t, "", args...)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(90 * time.Second):
		t.Fatal("the crawl never reached /p/10")
	}
	return cmd, stdout, stderr
}

// crawledPaths returns the paths of the items in JSON lines out, sorted.
func crawledPaths(t *testing.T, out, base string) []string {
	t.Helper()
	var got []string
	for u := range urlsOf(jsonLines(t, out)) {
		got = append(got, strings.TrimPrefix(u, base))
	}
	slices.Sort(got)
	return got
}
