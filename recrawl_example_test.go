package magpie_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// exampleRecrawlSite serves /, /a, /b and /c on 127.0.0.1 with ETag and
// Last-Modified (http.ServeContent answers If-None-Match and
// If-Modified-Since with 304). edit replaces a page ("" deletes it).
func exampleRecrawlSite() (url string, edit func(path, body string), stop func()) {
	var mu sync.Mutex
	pages := map[string]string{"/": `<a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a>`, "/a": "a", "/b": "b", "/c": "c"}
	version := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		body, ok := pages[r.URL.Path]
		v := version[r.URL.Path]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, v))
		http.ServeContent(w, r, "", time.Date(2026, 1, 1, v, 0, 0, 0, time.UTC), strings.NewReader(body))
	}))
	edit = func(path, body string) {
		mu.Lock()
		defer mu.Unlock()
		version[path]++
		if body == "" {
			delete(pages, path)
			return
		}
		pages[path] = body
	}
	return srv.URL, edit, srv.Close
}

// ExampleRecrawl crawls a site into a SQLite store, then, after one page
// changed and one went, crawls it again over the same store: every page
// is revisited (MinInterval 0) with a conditional request, and each
// response says what changed.
func ExampleRecrawl() {
	site, edit, stop := exampleRecrawlSite()
	defer stop()
	dir, err := os.MkdirTemp("", "recrawl")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	crawl := func() {
		st, err := sqlitestore.Open(filepath.Join(dir, "crawl.db"))
		if err != nil {
			log.Fatal(err)
		}
		defer st.Close()
		c := magpie.NewCollector(magpie.Recrawl(magpie.RecrawlPolicy{MinInterval: 0, MaxInterval: 30 * 24 * time.Hour}))
		if err := c.SetStorage(st); err != nil {
			log.Fatal(err)
		}
		c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		c.OnScraped(func(r *magpie.Response) { fmt.Println(r.Request.URL.Path, r.Change) })
		c.OnError(func(r *magpie.Response, err error) {
			if r.Change == magpie.ChangeGone { // 404 or 410 where a page was
				fmt.Println(r.Request.URL.Path, r.Change)
			}
		})
		// The first Visit also queues every page of the store that is due.
		if err := c.Visit(site + "/"); err != nil {
			log.Fatal(err)
		}
		s := c.Stats().Recrawl
		fmt.Printf("%d new, %d changed, %d unchanged, %d gone\n", s.New, s.Changed, s.Unchanged, s.Gone)
	}
	crawl()
	edit("/b", "b, edited")
	edit("/c", "")
	crawl()
	// Unordered output:
	// / new
	// /a new
	// /b new
	// /c new
	// 4 new, 0 changed, 0 unchanged, 0 gone
	// / unchanged
	// /a unchanged
	// /b changed
	// /c gone
	// 0 new, 1 changed, 2 unchanged, 1 gone
}

// TestReadmeRecrawl keeps the README's recrawl example identical to
// ExampleRecrawl, which go test runs.
func TestReadmeRecrawl(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("recrawl_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	start := strings.Index(s, "func ExampleRecrawl() {")
	end := strings.Index(s[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("recrawl_example_test.go has no func ExampleRecrawl")
	}
	example := s[start : start+end+3]
	if !strings.Contains(string(readme), "```go\n"+example+"```") {
		t.Errorf("README.md's recrawl example differs from ExampleRecrawl in recrawl_example_test.go; copy it over:\n%s", example)
	}
}
