//go:build unix

package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// killSite is a site of numbered pages with validators (ETag and
// Last-Modified, answered by http.ServeContent) whose content the test
// changes. While armed, the answer to the nth request for a page of the
// armed set is sent in full and then reported on fired, so that a test can
// kill the crawler as it processes that page.
type killSite struct {
	*httptest.Server
	mu      sync.Mutex
	pages   map[string]string
	version map[string]int
	armed   map[string]bool
	left    int
	fired   chan string
}

func newKillSite(t *testing.T) *killSite {
	s := &killSite{pages: map[string]string{}, version: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *killSite) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, ok := s.pages[r.URL.Path]
	v := s.version[r.URL.Path]
	fire := false
	if s.armed[r.URL.Path] {
		s.left--
		fire = s.left == 0
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, v))
	http.ServeContent(w, r, "", time.Date(2025, 1, 1, 0, v, 0, 0, time.UTC), strings.NewReader(body))
	if fire {
		w.(http.Flusher).Flush()
		s.fired <- r.URL.Path
	}
}

// set replaces a page's body (a new version), or deletes it ("").
func (s *killSite) set(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body == "" {
		delete(s.pages, path)
		return
	}
	s.pages[path] = body
	s.version[path]++
}

// arm makes the nth request for a path of paths report on the returned
// channel.
func (s *killSite) arm(n int, paths []string) <-chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.left, s.fired = map[string]bool{}, n, make(chan string, 1)
	for _, p := range paths {
		s.armed[p] = true
	}
	return s.fired
}

func (s *killSite) disarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = nil
}

// reportOf reads a recrawl's JSON lines output and maps each path to the
// set of changes its items carry.
func reportOf(t *testing.T, out, base string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, it := range jsonLines(t, string(data)) {
		u, _ := it["url"].(string)
		ch, _ := it["change"].(string)
		p := strings.TrimPrefix(u, base)
		if !slices.Contains(got[p], ch) {
			got[p] = append(got[p], ch)
			slices.Sort(got[p])
		}
	}
	return got
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// Issue 30: a recrawl over a SQLite --state killed with SIGKILL in the
// middle (some pages of the recrawl done, some not) and run again with the
// same command finishes the recrawl with the report an uninterrupted one
// gives: every page with exactly one change, the same as the
// uninterrupted run's. A page whose new state was stored before its queue
// entry was acknowledged would be fetched again and found "unchanged"
// against that new state; a resumed run that started the recrawl anew
// would report every page it had done as unchanged too. The kill comes as
// the crawler processes the nth changed page, n varied.
func TestCLIRecrawlKilledResumes(t *testing.T) {
	const pages = 40
	for _, nth := range []int{2, 6, 11} {
		t.Run(fmt.Sprintf("kill at changed page %d", nth), func(t *testing.T) {
			site := newKillSite(t)
			home := `<title>home</title>`
			for i := range pages {
				home += fmt.Sprintf(`<a href="/p/%d">%d</a>`, i, i)
				site.set(fmt.Sprintf("/p/%d", i), fmt.Sprintf(`<title>page %d</title><a href="/p/%d">next</a>`, i, (i+1)%pages))
			}
			site.set("/", home)
			dir := t.TempDir()
			state := filepath.Join(dir, "st.db")
			base := []string{"crawl", site.URL + "/", "--allow-loopback", "--parallel", "1", "-q"}
			first := cli(t, "", slices.Concat(base, []string{"--state", state, "-o", filepath.Join(dir, "first.jsonl")})...)
			if first.code != 0 {
				t.Fatalf("first crawl: exit %d, stderr:\n%s", first.code, first.stderr)
			}

			// 12 pages change (the first of them links to 3 new pages), 3 go.
			want := map[string][]string{"/": {"unchanged"}}
			var changed []string
			for i := range pages {
				p := fmt.Sprintf("/p/%d", i)
				switch {
				case i%3 == 0 && i < 36:
					changed = append(changed, p)
					want[p] = []string{"changed"}
					site.set(p, fmt.Sprintf(`<title>page %d, edited</title><a href="/p/%d">next</a>`, i, (i+1)%pages))
				case i == 37 || i == 38 || i == 39:
					want[p] = []string{"gone"}
					site.set(p, "")
				default:
					want[p] = []string{"unchanged"}
				}
			}
			links := ""
			for i := range 3 {
				p := fmt.Sprintf("/new/%d", i)
				want[p] = []string{"new"}
				site.set(p, fmt.Sprintf("<title>new %d</title>", i))
				links += fmt.Sprintf(`<a href="%s">%d</a>`, p, i)
			}
			site.set("/p/0", `<title>page 0, edited</title><a href="/p/1">next</a>`+links)

			// The uninterrupted recrawl, over a copy of the state.
			refState := filepath.Join(dir, "ref.db")
			for _, suffix := range []string{"", "-wal", "-shm"} {
				copyFile(t, state+suffix, refState+suffix)
			}
			refOut := filepath.Join(dir, "ref.jsonl")
			if r := cli(t, "", slices.Concat(base, []string{"--state", refState, "-o", refOut, "--revisit-after", "0"})...); r.code > 1 {
				t.Fatalf("uninterrupted recrawl: exit %d, stderr:\n%s", r.code, r.stderr)
			}
			ref := reportOf(t, refOut, site.URL)
			if !maps.EqualFunc(ref, want, slices.Equal) {
				t.Fatalf("uninterrupted recrawl reports %v\nwant %v", ref, want)
			}

			out := filepath.Join(dir, "recrawl.jsonl")
			args := slices.Concat(base, []string{"--state", state, "-o", out, "--revisit-after", "0"})
			fired := site.arm(nth, changed)
			cmd := cliCommand(t, "", args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-fired:
			case <-t.Context().Done():
				t.Fatal("the recrawl never reached the changed page to be killed at")
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err == nil {
				t.Fatal("the recrawl to be killed finished first")
			}
			site.disarm()

			again := cli(t, "", args...)
			if again.code > 1 {
				t.Fatalf("recrawl run again after SIGKILL: exit %d, stderr:\n%s", again.code, again.stderr)
			}
			if got := reportOf(t, out, site.URL); !maps.EqualFunc(got, ref, slices.Equal) {
				for p, w := range ref {
					if !slices.Equal(got[p], w) {
						t.Errorf("%s: changes %q after the kill and the run again, want %q as uninterrupted", p, got[p], w)
					}
				}
				t.Errorf("report after the kill: %d pages, uninterrupted %d; stderr of the run again:\n%s", len(got), len(ref), again.stderr)
			}
		})
	}
}
