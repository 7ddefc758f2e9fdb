// JavaScript: crawl a shop whose product list is built by a script, rendering
// only the catalogue pages in a headless Chromium and fetching the rest over
// plain HTTP.
//
//	go run ./_examples/javascript
//
// It serves its own shop on 127.0.0.1. It needs Chromium (Debian: apt-get
// install chromium) or Chrome on PATH.
package main

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/render"
)

// The catalogue page is empty until its script fetches the products and
// builds the list, links included: over plain HTTP a crawler sees nothing.
const catalogue = `<!DOCTYPE html>
<html><head><title>Catalogue</title></head>
<body><h1>Catalogue</h1><ul id="products"></ul>
<script>
fetch('/api/products').then(r => r.json()).then(products => {
	const ul = document.getElementById('products');
	for (const p of products) {
		const li = document.createElement('li');
		li.className = 'product';
		li.innerHTML = '<a href="/product/' + p.id + '">' + p.name + '</a>';
		ul.appendChild(li);
	}
});
</script></body></html>`

var products = map[string]string{"1": "Blue kettle", "2": "Copper pan", "3": "Oak spoon"}

func shop() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/catalogue", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, catalogue) })
	mux.HandleFunc("/api/products", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"id":"1","name":"Blue kettle"},{"id":"2","name":"Copper pan"},{"id":"3","name":"Oak spoon"}]`)
	})
	mux.HandleFunc("/product/{id}", func(w http.ResponseWriter, r *http.Request) {
		name, ok := products[r.PathValue("id")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `<html><body><h1 class="name">%s</h1><p class="price">%d.50 EUR</p></body></html>`, name, 10*len(name))
	})
	return httptest.NewServer(mux)
}

func main() {
	srv := shop()
	defer srv.Close()

	// Render only the catalogue: the product pages are plain HTML and are
	// cheaper over HTTP.
	r, err := render.New(render.Match(`/catalogue$`), render.Tabs(2), render.Timeout(20*time.Second))
	if err != nil {
		log.Fatal(err) // render.ErrNoBrowser without Chromium
	}
	defer r.Close()

	c := magpie.NewCollector(magpie.WithFetcher(r))
	c.OnHTML("li.product a[href]", func(e *magpie.HTMLElement) {
		fmt.Println("product:", e.Text)
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnHTML("p.price", func(e *magpie.HTMLElement) {
		fmt.Printf("price of %s: %s\n", strings.TrimPrefix(e.Request.URL.Path, "/product/"), e.Text)
	})
	c.OnResponse(func(resp *magpie.Response) {
		how := "http"
		if r.Selects(resp.Request) {
			how = "rendered"
		}
		fmt.Printf("%-8s %d %s\n", how, resp.StatusCode, resp.Request.URL.Path)
	})
	c.OnError(func(resp *magpie.Response, err error) {
		fmt.Println("error:", resp.Request.URL, err)
	})
	// Wait (here: the synchronous Visit) ends the browser.
	if err := c.Visit(srv.URL + "/catalogue"); err != nil {
		log.Fatal(err)
	}
}
