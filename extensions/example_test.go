package extensions_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/extensions"
)

func ExampleReferer() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<a href="/next">next</a>`)
		}
	}))
	defer srv.Close()

	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	extensions.Referer(c)
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnRequest(func(r *magpie.Request) {
		ref := strings.TrimPrefix(r.Headers.Get("Referer"), srv.URL)
		fmt.Printf("%s, Referer %q\n", r.URL.Path, ref)
	})
	_ = c.Visit(srv.URL + "/")
	// Output:
	// /, Referer ""
	// /next, Referer "/"
}

func ExampleRandomUserAgent() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Header.Get("User-Agent"))
	}))
	defer srv.Close()

	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	extensions.RandomUserAgent(c)
	c.OnResponse(func(r *magpie.Response) {
		fmt.Println(strings.HasPrefix(string(r.Body), "Mozilla/5.0 ("))
	})
	_ = c.Visit(srv.URL)
	// Output: true
}

func ExampleURLLengthFilter() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	extensions.URLLengthFilter(c, len(srv.URL)+20)
	c.OnResponse(func(r *magpie.Response) { fmt.Println("fetched", r.Request.URL.Path) })
	_ = c.Visit(srv.URL + "/short")
	_ = c.Visit(srv.URL + "/" + strings.Repeat("very-long/", 10))
	// Output: fetched /short
}
