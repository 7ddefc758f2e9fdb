package magpie_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"

	"github.com/magpiecrawl/magpie"
)

// Example is the README quick start: follow every link of a small site and
// print each page's title.
func Example() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<title>Home</title><a href="/about">about</a><a href="/blog">blog</a>`)
		case "/about":
			fmt.Fprint(w, `<title>About</title><a href="/">home</a>`)
		case "/blog":
			fmt.Fprint(w, `<title>Blog</title><a href="/about">about</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.Async(), magpie.MaxDepth(3))

	var mu sync.Mutex
	var titles []string
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		mu.Lock()
		titles = append(titles, e.Request.URL.Path+" "+e.Text)
		mu.Unlock()
	})
	c.OnError(func(r *magpie.Response, err error) {
		// Only requests that were sent and failed come here; links that
		// are refused (already visited, other domains) go to OnRefused.
		fmt.Println("error:", r.Request.URL, err)
	})

	if err := c.Visit(site.URL + "/"); err != nil {
		fmt.Println(err)
	}
	c.Wait()

	sort.Strings(titles)
	for _, t := range titles {
		fmt.Println(t)
	}
	fmt.Println(c)
	// Output:
	// / Home
	// /about About
	// /blog Blog
	// Requests made: 3 (3 responses) | Callbacks: OnRequest: 0, OnHTML: 2, OnResponse: 0, OnError: 1
}
