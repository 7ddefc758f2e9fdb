package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadmeHasQuickstart keeps the program the README's quick start shows
// identical to this one, which CI builds and TestQuickstart runs.
func TestReadmeHasQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Errorf("README.md's quick start program differs from _examples/quickstart/main.go; copy it over:\n%s", src)
	}
}

// TestQuickstart runs the program on a local site: it prints the titles of
// the start page and the pages it links to (MaxDepth(2)), not of a page one
// link further nor of another site, then the counts.
func TestQuickstart(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<title>Home</title><a href="/about">about</a><a href="/blog">blog</a><a href="https://elsewhere.invalid/">away</a>`)
		case "/about":
			fmt.Fprint(w, `<title>About</title><a href="/">home</a><a href="/deep">deeper</a>`)
		case "/blog":
			fmt.Fprint(w, `<title>Blog</title>`)
		case "/deep":
			t.Errorf("%s fetched: it is at depth 3, beyond MaxDepth(2)", r.URL.Path)
			fmt.Fprint(w, `<title>Deep</title>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()

	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	stdout, args := os.Stdout, os.Args
	os.Stdout, os.Args = out, []string{"quickstart", site.URL + "/"}
	defer func() { os.Stdout, os.Args = stdout, args }()
	main()
	os.Stdout, os.Args = stdout, args

	if _, err := out.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("the program printed %d lines, want 3 titles and the counts:\n%s", len(lines), b)
	}
	titles := slices.Sorted(slices.Values(lines[:3]))
	want := []string{site.URL + "/ Home", site.URL + "/about About", site.URL + "/blog Blog"}
	if !slices.Equal(titles, want) {
		t.Errorf("titles = %q, want %q", titles, want)
	}
	counts := "Requests made: 3 (3 responses) | Callbacks: OnRequest: 0, OnHTML: 2, OnResponse: 0, OnError: 1"
	if lines[3] != counts {
		t.Errorf("last line = %q, want %q", lines[3], counts)
	}
}
