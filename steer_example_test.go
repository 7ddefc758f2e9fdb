package magpie_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/magpiecrawl/magpie"
)

// A crawl paused before it starts sends nothing until Resume; a blocked
// host is refused, with its own reason.
func ExampleCollector_Pause() {
	var served atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/next">next</a>`)
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.Async(), magpie.IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })

	c.Pause()
	_ = c.Visit(site.URL + "/") // admitted; waits for Resume
	fmt.Println("paused:", c.Paused(), "served:", served.Load())

	_ = c.BlockHost("www.example.com")
	err := c.Visit("https://www.example.com/")
	fmt.Println(errors.Is(err, magpie.ErrHostBlocked), c.Stats().Refused[magpie.RefusedBlocked])

	c.Resume()
	c.Wait()
	fmt.Println("paused:", c.Paused(), "served:", served.Load())
	// Output:
	// paused: true served: 0
	// true 1
	// paused: false served: 2
}
