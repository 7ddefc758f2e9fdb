package magpie

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestFileScheme: file:// URLs are crawled when the transport has the
// protocol registered (Colly's local_files example), without robots.txt or
// limits; without it they are refused as an unsupported scheme.
func TestFileScheme(t *testing.T) {
	dir := t.TempDir()
	pages := map[string]string{
		"index.html": `<h1>Index</h1><a href="a.html">a</a> <a href="b.html#part">b</a> <a href="mailto:x@example.com">mail</a>`,
		"a.html":     `<h1>A</h1><a href="index.html">back</a>`,
		"b.html":     `<h1>B</h1>`,
	}
	for name, body := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := "file://" + filepath.ToSlash(filepath.Join(dir, "index.html"))

	t.Run("registered", func(t *testing.T) {
		tr := &http.Transport{}
		tr.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
		c := NewCollector(AllowedDomains("example.org"))
		c.WithTransport(tr)
		// A rule for every host must not delay file:// requests.
		if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		var refused []error
		c.OnHTML("h1", func(e *HTMLElement) {
			mu.Lock()
			got = append(got, e.Text)
			mu.Unlock()
		})
		c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		c.OnRefused(func(_ *Request, err error) {
			mu.Lock()
			refused = append(refused, err)
			mu.Unlock()
		})
		done := make(chan error, 1)
		go func() { done <- c.Visit(start) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Visit(%q) error = %v", start, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Visit of file:// pages did not return: a limit or robots.txt applied")
		}
		slices.Sort(got)
		if want := []string{"A", "B", "Index"}; !slices.Equal(got, want) {
			t.Errorf("pages crawled = %v, want %v", got, want)
		}
		var scheme, visited int
		for _, err := range refused {
			var ave *AlreadyVisitedError
			switch {
			case errors.Is(err, ErrUnsupportedScheme):
				scheme++
			case errors.As(err, &ave):
				visited++
			default:
				t.Errorf("unexpected refusal %v", err)
			}
		}
		if scheme != 1 || visited != 1 {
			t.Errorf("refusals: %d scheme (mailto), %d visited (index); want 1 and 1", scheme, visited)
		}
	})

	t.Run("not registered", func(t *testing.T) {
		c := NewCollector()
		if err := c.Visit(start); !errors.Is(err, ErrUnsupportedScheme) {
			t.Errorf("Visit(%q) error = %v, want ErrUnsupportedScheme", start, err)
		}
	})
}
