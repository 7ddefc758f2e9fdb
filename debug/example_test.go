package debug_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/debug"
)

// counter is a Debugger that counts events by type.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) Init() error { c.n = map[string]int{}; return nil }

func (c *counter) Event(e *debug.Event) {
	c.mu.Lock()
	c.n[e.Type]++
	c.mu.Unlock()
}

// A debugger sees every step of every request; this one counts them.
func ExampleDebugger() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<h1>hello</h1>`)
	}))
	defer site.Close()

	d := &counter{}
	c := magpie.NewCollector(magpie.Debugger(d), magpie.IgnoreRobotsTxt())
	c.OnHTML("h1", func(*magpie.HTMLElement) {})
	_ = c.Visit(site.URL)

	types := make([]string, 0, len(d.n))
	for t := range d.n {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Println(t, d.n[t])
	}
	// Output:
	// html 1
	// request 1
	// requestHeaders 1
	// response 1
	// responseHeaders 1
	// scraped 1
}

// A WebDebugger serves a live page of the crawl; here on a free port.
func ExampleWebDebugger() {
	w := &debug.WebDebugger{Address: "127.0.0.1:0"}
	c := magpie.NewCollector(magpie.Debugger(w))
	defer w.Close()
	_ = c // crawl as usual; open http://<w.Addr()>/ in a browser meanwhile
	fmt.Println(w.Addr() != "")
	// Output: true
}
