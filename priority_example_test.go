package magpie_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/magpiecrawl/magpie"
)

// Prioritize ranks requests the program did not build, here by URL: the
// documentation pages go first, whatever order they were found in.
func ExamplePrioritize() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.Async(), magpie.IgnoreRobotsTxt(),
		// One download at a time, and no request taken ahead of its
		// turn, so that the order shows.
		magpie.Workers(1), magpie.MaxParked(1),
		magpie.Prioritize(func(r *magpie.Request) int {
			if strings.HasPrefix(r.URL.Path, "/docs/") {
				return r.Priority + 10
			}
			return r.Priority
		}))
	c.OnRequest(func(r *magpie.Request) { fmt.Println(r.URL.Path, r.Priority) })

	c.Pause() // queue everything before the first request starts
	for _, p := range []string{"/docs/a", "/docs/b", "/docs/c", "/blog/1", "/blog/2", "/docs/d", "/blog/3", "/docs/e"} {
		_ = c.Visit(site.URL + p)
	}
	c.Resume()
	c.Wait()
	// Output:
	// /docs/a 10
	// /docs/b 10
	// /docs/c 10
	// /docs/d 10
	// /docs/e 10
	// /blog/1 0
	// /blog/2 0
	// /blog/3 0
}
