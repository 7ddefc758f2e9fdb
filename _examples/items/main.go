// Items: scrape a product catalogue into a CSV file through an item
// pipeline that validates and de-duplicates the products.
//
//	go run ./_examples/items [-o products.csv] [URL]
//
// Without a URL it serves a small catalogue on 127.0.0.1 whose pages list
// some products twice and one without a price.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/feed"
)

// Product is one item; the CSV columns are its json tags.
type Product struct {
	SKU   string  `json:"sku"`
	Name  string  `json:"name"`
	Price float64 `json:"price"`
	Page  string  `json:"page"`
}

func main() {
	out := flag.String("o", "", "CSV file to write (default: a temporary file, printed)")
	flag.Parse()
	start := flag.Arg(0)
	if start == "" {
		srv := catalogue()
		defer srv.Close()
		start = srv.URL + "/"
	}
	u, err := url.Parse(start)
	if err != nil {
		log.Fatal(err)
	}
	if *out == "" {
		dir, err := os.MkdirTemp("", "magpie-items")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		*out = filepath.Join(dir, "products.csv")
	}
	exp, err := feed.Create(*out)
	if err != nil {
		log.Fatal(err)
	}

	c := magpie.NewCollector(magpie.AllowedDomains(u.Hostname()))
	c.OnHTML("a.page", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnHTML(".product", func(e *magpie.HTMLElement) {
		price, _ := strconv.ParseFloat(e.ChildText(".price"), 64)
		e.Emit(&Product{SKU: e.Attr("data-sku"), Name: e.ChildText(".name"), Price: price, Page: e.Request.URL.Path})
	})

	var mu sync.Mutex
	seen := map[string]bool{}
	validate := func(_ context.Context, it *magpie.Item) error {
		if p := it.Value.(*Product); p.Price <= 0 {
			return fmt.Errorf("%s has no price: %w", p.SKU, magpie.ErrDropItem)
		}
		return nil
	}
	dedupe := func(_ context.Context, it *magpie.Item) error {
		p := it.Value.(*Product)
		mu.Lock()
		defer mu.Unlock()
		if seen[p.SKU] {
			return fmt.Errorf("%s seen before: %w", p.SKU, magpie.ErrDropItem)
		}
		seen[p.SKU] = true
		return nil
	}
	clean := func(_ context.Context, it *magpie.Item) error {
		p := it.Value.(*Product)
		p.Name = strings.Join(strings.Fields(p.Name), " ")
		return nil
	}
	c.Pipeline(validate, dedupe, clean, exp.Processor())

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	if err := exp.Close(); err != nil {
		log.Fatal(err)
	}
	st := c.Stats()
	fmt.Printf("items: %d written, %d dropped, %d failed\n", st.ItemsScraped, st.ItemsDropped, st.ItemsFailed)
	data, err := os.ReadFile(*out)
	if errors.Is(err, os.ErrNotExist) {
		log.Fatal("no CSV written")
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s:\n%s", filepath.Base(*out), data)
}

// catalogue serves three pages of products; some repeat, one has no price.
func catalogue() *httptest.Server {
	pages := map[string][]string{
		"/":       {`<div class=product data-sku=B1><span class=name>Walking  boots</span><span class=price>89.90</span></div>`, `<div class=product data-sku=H1><span class=name>Sun hat</span><span class=price>19.50</span></div>`},
		"/page/2": {`<div class=product data-sku=B1><span class=name>Walking boots</span><span class=price>89.90</span></div>`, `<div class=product data-sku=S1><span class=name>Socks, wool, "warm"</span><span class=price>7</span></div>`},
		"/page/3": {`<div class=product data-sku=X1><span class=name>Mystery box</span><span class=price></span></div>`, `<div class=product data-sku=U1><span class=name>Umbrella</span><span class=price>25</span></div>`},
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		products, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html><title>Catalogue</title>", strings.Join(products, ""),
			`<a class=page href="/">1</a><a class=page href="/page/2">2</a><a class=page href="/page/3">3</a>`)
	}))
}
