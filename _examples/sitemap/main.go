// Sitemap: crawl the pages a site lists in its sitemaps instead of following
// links. The sitemaps are found through robots.txt (Sitemap: lines), read
// through a sitemap index, and may be gzip-compressed.
//
//	go run ./_examples/sitemap [SITE_URL]
//
// Without a URL it serves a small shop on 127.0.0.1 with a sitemap index of
// two gzip-compressed sitemaps.
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/magpiecrawl/magpie"
)

func main() {
	start := ""
	if len(os.Args) > 1 {
		start = os.Args[1]
	} else {
		srv := shop()
		defer srv.Close()
		start = srv.URL + "/"
	}
	u, err := url.Parse(start)
	if err != nil {
		log.Fatal(err)
	}

	c := magpie.NewCollector(
		magpie.AllowedDomains(u.Hostname()),
		magpie.SitemapsFromRobots(), // read the Sitemap: lines of robots.txt
		magpie.Async(),
	)
	var mu sync.Mutex
	var products []string
	c.OnHTML("h1", func(e *magpie.HTMLElement) {
		mu.Lock()
		products = append(products, e.Request.URL.Path+": "+e.Text)
		mu.Unlock()
	})
	c.OnError(func(r *magpie.Response, err error) {
		fmt.Println("error:", r.Request.URL, err)
	})

	// Visiting any page makes magpie read robots.txt, and with it the sitemaps.
	// c.VisitSitemap(start + "sitemap_index.xml") would read one directly.
	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	c.Wait()
	sort.Strings(products)
	for _, p := range products {
		fmt.Println(p)
	}
	fmt.Println("pages:", len(products))
}

// shop serves robots.txt, a sitemap index, two gzip sitemaps and the pages.
func shop() *httptest.Server {
	names := map[string][]string{
		"/sitemap-shoes.xml.gz": {"boots", "sandals", "sneakers"},
		"/sitemap-hats.xml.gz":  {"beret", "cap"},
	}
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("GET /robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/sitemap_index.xml\n", srv.URL)
	})
	mux.HandleFunc("GET /sitemap_index.xml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, p := range []string{"/sitemap-hats.xml.gz", "/sitemap-shoes.xml.gz"} {
			fmt.Fprintf(w, "<sitemap><loc>%s%s</loc></sitemap>", srv.URL, p)
		}
		fmt.Fprint(w, `</sitemapindex>`)
	})
	for path, items := range names {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			var doc strings.Builder
			doc.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
			for _, it := range items {
				fmt.Fprintf(&doc, "<url><loc>%s/product/%s</loc><lastmod>2026-11-01</lastmod></url>", srv.URL, it)
			}
			doc.WriteString(`</urlset>`)
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write([]byte(doc.String()))
			_ = zw.Close()
			w.Header().Set("Content-Type", "application/gzip")
			_, _ = w.Write(z.Bytes())
		})
	}
	mux.HandleFunc("GET /product/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<!DOCTYPE html><title>%[1]s</title><h1>%[1]s</h1>", r.PathValue("name"))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!DOCTYPE html><title>Shop</title><h1>Shop</h1><p>No links here: see the sitemaps.</p>")
	})
	srv = httptest.NewServer(mux)
	return srv
}
