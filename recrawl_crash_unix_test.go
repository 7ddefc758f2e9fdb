//go:build unix

package magpie_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
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

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// The crash test runs its recrawls in child processes (this test binary
// run again, TestRecrawlCrashChild) so that one can be killed with
// SIGKILL. A child prints "change PATH CHANGE" for every page it judges,
// and, for the page named by MAGPIE_RECRAWL_HOLD, prints "held PATH" once
// its callbacks run and then waits to be killed: the page was fetched and
// judged, its queue entry not yet acknowledged.

const (
	crashEnvState = "MAGPIE_RECRAWL_STATE"
	crashEnvSite  = "MAGPIE_RECRAWL_SITE"
	crashEnvHold  = "MAGPIE_RECRAWL_HOLD"
)

// TestRecrawlCrashChild is the child of TestRecrawlKilledBeforeAck; run
// directly, it skips.
func TestRecrawlCrashChild(t *testing.T) {
	path, site := os.Getenv(crashEnvState), os.Getenv(crashEnvSite)
	if path == "" || site == "" {
		t.Skip("the child process of TestRecrawlKilledBeforeAck")
	}
	hold := os.Getenv(crashEnvHold)
	store, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := magpie.NewCollector(magpie.Recrawl(magpie.RecrawlPolicy{}))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c.WithTransport(tr)
	if err := c.SetStorage(store); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnScraped(func(r *magpie.Response) {
		say("change %s %s", r.Request.URL.Path, r.Change)
		if r.Request.URL.Path == hold {
			say("held %s", hold)
			<-t.Context().Done() // killed here
		}
	})
	c.OnError(func(r *magpie.Response, err error) {
		if r.Change == magpie.ChangeGone {
			say("change %s %s", r.Request.URL.Path, r.Change)
			return
		}
		t.Errorf("OnError(%s): %v", r.Request.URL, err)
	})
	q, err := queue.New(1, store)
	if err != nil {
		t.Fatal(err)
	}
	n, err := store.Len(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n.Total() == 0 {
		// A new recrawl (or the first crawl): the due pages and the start.
		// Entries left in the queue are an interrupted one, resumed as it is.
		for u, err := range c.DueURLs(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			if err := q.AddURL(u); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.MarkDue(site + "/"); err != nil {
			t.Fatal(err)
		}
		if err := q.AddURL(site + "/"); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.RunContext(t.Context(), c); err != nil {
		t.Fatal(err)
	}
}

// crashSite serves pages the test edits, with ETag and Last-Modified.
type crashSite struct {
	*httptest.Server
	mu      sync.Mutex
	pages   map[string]string
	version map[string]int
}

func (s *crashSite) set(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body == "" {
		delete(s.pages, path)
		return
	}
	s.pages[path] = body
	s.version[path]++
}

func newCrashSite(t *testing.T) *crashSite {
	s := &crashSite{pages: map[string]string{}, version: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, ok := s.pages[r.URL.Path]
		v := s.version[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, v))
		http.ServeContent(w, r, "", time.Date(2025, 1, 1, 0, v, 0, 0, time.UTC), strings.NewReader(body))
	}))
	t.Cleanup(s.Close)
	return s
}

// crashChild runs one child crawl over state; with hold set, it returns
// once the child holds that page, having killed it with SIGKILL. It
// returns the changes the child printed, by path.
func crashChild(t *testing.T, state, site, hold string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRecrawlCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvState+"="+state, crashEnvSite+"="+site, crashEnvHold+"="+hold)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	held := false
	var other strings.Builder // the child's test output
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "change":
			if !slices.Contains(got[f[1]], f[2]) {
				got[f[1]] = append(got[f[1]], f[2])
				slices.Sort(got[f[1]])
			}
		case len(f) == 2 && f[0] == "held" && hold != "":
			held = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		default:
			other.WriteString(sc.Text() + "\n")
		}
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	switch {
	case hold != "" && !held:
		t.Fatalf("the child never held %s (%v); output:\n%s%s", hold, werr, &other, stderr.String())
	case hold == "" && werr != nil:
		t.Fatalf("child crawl: %v; output:\n%s%s", werr, &other, stderr.String())
	}
	return got
}

// Issue 30: a recrawl over SQLite killed (SIGKILL) after a changed page
// was fetched and judged, before its queue entry was acknowledged, is run
// again: the page is fetched again and judged against the state it was
// judged against before, so it is "changed" again, never "unchanged"
// against a state its first fetch stored. The reports of the killed run
// and of the run again together equal an uninterrupted recrawl's: each
// page with one change, the right one.
func TestRecrawlKilledBeforeAck(t *testing.T) {
	for _, hold := range []string{"/p/4", "/p/8", "/new", "/p/5"} {
		t.Run("held "+hold, func(t *testing.T) {
			site := newCrashSite(t)
			const pages = 12
			home := ""
			for i := range pages {
				p := fmt.Sprintf("/p/%d", i)
				home += fmt.Sprintf(`<a href="%s">%d</a>`, p, i)
				site.set(p, fmt.Sprintf("<title>%d</title>", i))
			}
			site.set("/", home)
			state := filepath.Join(t.TempDir(), "st.db")
			if first := crashChild(t, state, site.URL, ""); len(first) != pages+1 {
				t.Fatalf("first crawl judged %d pages, want %d: %v", len(first), pages+1, first)
			}

			// Every fourth page changes (/p/4 links to a new page), the
			// next one goes (404), the rest stay.
			want := map[string][]string{"/": {"unchanged"}}
			for i := range pages {
				p := fmt.Sprintf("/p/%d", i)
				switch i % 4 {
				case 0:
					site.set(p, fmt.Sprintf("<title>%d, edited</title>", i))
					want[p] = []string{"changed"}
				case 1:
					site.set(p, "")
					want[p] = []string{"gone"}
				default:
					want[p] = []string{"unchanged"}
				}
			}
			site.set("/p/4", `<title>4, edited</title><a href="/new">new</a>`)
			site.set("/new", "<title>new</title>")
			want["/new"] = []string{"new"}
			if hold == "/p/5" {
				// A page that went: OnError, not OnScraped; hold at an
				// unchanged page instead.
				hold = "/p/6"
			}

			killed := crashChild(t, state, site.URL, hold)
			again := crashChild(t, state, site.URL, "")
			if !slices.Equal(again[hold], want[hold]) {
				t.Errorf("run again after the kill: %s judged %q, want %q as before the kill", hold, again[hold], want[hold])
			}
			report := maps.Clone(killed)
			for p, chs := range again {
				for _, ch := range chs {
					if !slices.Contains(report[p], ch) {
						report[p] = append(report[p], ch)
						slices.Sort(report[p])
					}
				}
			}
			if !maps.EqualFunc(report, want, slices.Equal) {
				t.Errorf("killed at %s: the killed run judged %v, the run again %v; want together %v", hold, killed, again, want)
			}
		})
	}
}
