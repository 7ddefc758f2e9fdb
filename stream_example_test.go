package magpie_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"

	"github.com/magpiecrawl/magpie"
)

// ExampleStreamHTML crawls with StreamHTML: the selectors name a tag and its
// attributes, so each page is matched while it is tokenized and only the
// matched elements are built. The second page nests formatting tags wrongly,
// which the HTML parser repairs by rebuilding elements: that page is parsed
// whole, and the callbacks see the same elements either way.
func ExampleStreamHTML() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<title>Home</title><p>See <a href="/next" rel="next">the <b>next</b> page</a>.`)
		case "/next":
			fmt.Fprint(w, `<title>Next</title><p><b>bold <i>both</b> italic</i> <a href="/">home</a>`)
		}
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.StreamHTML())
	var mu sync.Mutex
	var seen []string
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s: link %q to %s", e.Request.URL.Path, e.Text, e.Attr("href")))
		mu.Unlock()
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s: title %q", e.Request.URL.Path, e.Text))
		mu.Unlock()
	})
	if err := c.Visit(site.URL + "/"); err != nil {
		fmt.Println(err)
	}
	c.Wait()
	// Pages are analyzed as they arrive: sorted, the output is the same
	// every run.
	sort.Strings(seen)
	for _, s := range seen {
		fmt.Println(s)
	}
	st := c.Stats()
	fmt.Printf("streamed %d, parsed whole %d\n", st.HTMLStreamed, st.HTMLParsedWhole)
	// Output:
	// /: link "the next page" to /next
	// /: title "Home"
	// /next: link "home" to /
	// /next: title "Next"
	// streamed 1, parsed whole 1
}
