package magpie_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/magpiecrawl/magpie"
)

// ExampleReuseBody reads every page into memory the collector reuses. The
// callbacks read the body while they run; what outlives them is a copy
// (bytes.Clone) or a string, and a Response kept past its callbacks has no
// body any more.
func ExampleReuseBody() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>Home</title><p>magpies collect shiny things</p>`)
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.ReuseBody())
	var first []byte
	var kept *magpie.Response
	c.OnResponse(func(r *magpie.Response) {
		fmt.Println("shiny:", bytes.Contains(r.Body, []byte("shiny")))
		first = bytes.Clone(r.Body[:14]) // a copy outlives the callback
		kept = r
	})
	if err := c.Visit(site.URL); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("copy: %s\n", first)
	fmt.Println("kept Response's body is nil:", kept.Body == nil)
	// Output:
	// shiny: true
	// copy: <title>Home</t
	// kept Response's body is nil: true
}
