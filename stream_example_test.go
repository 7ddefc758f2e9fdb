package magpie_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

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
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		fmt.Printf("%s: link %q to %s\n", e.Request.URL.Path, e.Text, e.Attr("href"))
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		fmt.Printf("%s: title %q\n", e.Request.URL.Path, e.Text)
	})
	if err := c.Visit(site.URL + "/"); err != nil {
		fmt.Println(err)
	}
	c.Wait()
	st := c.Stats()
	fmt.Printf("streamed %d, parsed whole %d\n", st.HTMLStreamed, st.HTMLParsedWhole)
	// Output:
	// /: link "the next page" to /next
	// /: title "Home"
	// /next: link "home" to /
	// /next: title "Next"
	// streamed 1, parsed whole 1
}
