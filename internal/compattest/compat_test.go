package compattest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// listStorage has Colly's queue storage methods and nothing else, like
// gocolly/redisstorage.Storage: GetRequest removes for good and returns
// nil, nil when empty.
type listStorage struct {
	mu    sync.Mutex
	items [][]byte
}

func (s *listStorage) Init() error { return nil }

func (s *listStorage) AddRequest(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, b)
	return nil
}

func (s *listStorage) GetRequest() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == 0 {
		return nil, nil
	}
	b := s.items[0]
	s.items = s.items[1:]
	return b, nil
}

func (s *listStorage) QueueSize() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items), nil
}

// TestOldChromedpStays: the build of this package uses chromedp v0.11, the
// version this module requires, and not the render module, which it does
// not import.
func TestOldChromedpStays(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	found := false
	for line := range strings.Lines(string(out)) {
		path, version, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch path {
		case "github.com/chromedp/chromedp":
			found = true
			if !strings.HasPrefix(version, "v0.11.") {
				t.Errorf("chromedp %s in the build, want v0.11.x: importing magpie upgraded it", version)
			}
		case "github.com/magpiecrawl/magpie/render", "github.com/prometheus/client_golang":
			t.Errorf("%s is in the build of a program that does not import it", path)
		}
	}
	if !found {
		t.Errorf("chromedp is not in the build:\n%s", out)
	}
	// The program drives chromedp v0.11 itself; making a context starts
	// no browser.
	_, cancel := chromedp.NewContext(context.Background())
	cancel()
}

// TestCollyQueueStorageCrawl crawls a local site through queue.New with a
// Colly queue storage, unchanged, with a sync collector whose callbacks
// append to plain slices, as Colly programs do.
func TestCollyQueueStorageCrawl(t *testing.T) {
	const pages = 20
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		var n int
		fmt.Sscanf(r.URL.Path, "/p/%d", &n)
		fmt.Fprintf(w, "<title>page %d</title>", n)
		for _, next := range []int{2*n + 1, 2*n + 2} {
			if next < pages {
				fmt.Fprintf(w, `<a href="/p/%d">next</a>`, next)
			}
		}
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.AllowedDomains("127.0.0.1"))
	var titles []string
	c.OnHTML("title", func(e *magpie.HTMLElement) { titles = append(titles, e.Text) })
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var failed []error
	c.OnError(func(_ *magpie.Response, err error) { failed = append(failed, err) })

	s := &listStorage{}
	q, err := queue.New(1, s) // one thread: callbacks take turns, as in Colly
	if err != nil {
		t.Fatalf("queue.New(1, Colly storage) error = %v", err)
	}
	if err := q.AddURL(site.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := q.RunContext(ctx, c); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if len(titles) != pages || len(failed) != 0 {
		t.Errorf("crawled %d pages with %d errors (%v), want %d and none", len(titles), len(failed), failed, pages)
	}
	if n, _ := s.QueueSize(); n != 0 {
		t.Errorf("Colly storage holds %d requests after Run, want 0", n)
	}
}
