package render_test

import (
	"fmt"
	"log"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/render"
)

// Render the pages under /app/ of a single-page application and read the
// links its scripts build; everything else is fetched over HTTP. (No Output:
// it needs a browser and a site.)
func Example() {
	r, err := render.New(
		render.Match(`^https://shop\.example/app/`), // which pages go to the browser
		render.Tabs(4),                    // pages loading at once
		render.Timeout(20*time.Second),    // per page
		render.WaitSelector("li.product"), // after load and network idle
	)
	if err != nil {
		log.Fatal(err) // render.ErrNoBrowser without Chromium
	}
	defer r.Close()

	c := magpie.NewCollector(magpie.WithFetcher(r), magpie.AllowedDomains("shop.example"))
	c.OnHTML("li.product a[href]", func(e *magpie.HTMLElement) {
		fmt.Println("product:", e.Text)
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnError(func(resp *magpie.Response, err error) {
		// render.ErrTimeout, render.ErrBrowserCrashed, ... with errors.Is.
		log.Println(resp.Request.URL, err)
	})
	// A page can also be chosen in OnRequest, whatever the rules say.
	c.OnRequest(func(req *magpie.Request) {
		if req.URL.Query().Get("view") == "js" {
			render.Mark(req)
		}
	})
	_ = c.Visit("https://shop.example/app/catalogue")
	c.Wait() // ends the browser; the next Visit starts it again
}
