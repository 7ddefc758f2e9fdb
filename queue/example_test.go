package queue_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

func Example() {
	// A three-page site: the home page links to two others.
	pages := map[string]string{
		"/":      `<title>home</title><a href="/about">about</a><a href="/news">news</a>`,
		"/about": `<title>about</title><a href="/">home</a>`,
		"/news":  `<title>news</title>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, body)
	}))
	defer srv.Close()

	c := magpie.NewCollector()
	var (
		mu     sync.Mutex
		titles []string
	)
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		mu.Lock()
		titles = append(titles, e.Text)
		mu.Unlock()
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		link, _ := e.DOM.Attr("href")
		_ = e.Request.Visit(link) // goes into the queue's storage
	})

	q, err := queue.New(2, &queue.InMemoryQueueStorage{MaxSize: 10000})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AddURL(srv.URL + "/"); err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Run(c); err != nil {
		fmt.Println(err)
		return
	}
	slices.Sort(titles)
	fmt.Println(titles, q.IsEmpty())
	// Output: [about home news] true
}
