// Scraper server: an HTTP service that scrapes the page named in its query
// and answers with the page's links as JSON.
//
//	go run ./_examples/scraper_server [-serve 127.0.0.1:7171]
//
// With -serve it serves until interrupted: try
// curl 'http://127.0.0.1:7171/?url=https://example.org/'. Without it, it
// starts a local site and its own server on a free port, asks itself for one
// page, prints the answer and exits.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
)

// pageLinks is the answer: the page and the links found on it.
type pageLinks struct {
	URL    string   `json:"url"`
	Status int      `json:"status"`
	Links  []string `json:"links"`
}

// scrape answers /?url=U with U's links. Each query uses its own collector,
// so that queries do not share a visited set.
func scrape(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("url")
	if target == "" {
		http.Error(w, "missing ?url=", http.StatusBadRequest)
		return
	}
	c := magpie.NewCollector(magpie.StdlibContext(r.Context()))
	answer := pageLinks{URL: target, Links: []string{}}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		answer.Links = append(answer.Links, e.Request.AbsoluteURL(e.Attr("href")))
	})
	c.OnResponse(func(res *magpie.Response) { answer.Status = res.StatusCode })
	if err := c.Visit(target); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(answer)
}

func main() {
	serve := flag.String("serve", "", "address to serve on until interrupted")
	flag.Parse()
	if *serve != "" {
		log.Printf("serving on http://%s/?url=...", *serve)
		log.Fatal(http.ListenAndServe(*serve, http.HandlerFunc(scrape)))
	}

	demo := site.Start()
	defer demo.Close()
	srv := httptest.NewServer(http.HandlerFunc(scrape))
	defer srv.Close()

	res, err := http.Get(srv.URL + "/?url=" + url.QueryEscape(demo.URL+"/page/1"))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(body))
}
