package magpie_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"github.com/antchfx/xmlquery"
	"github.com/magpiecrawl/magpie"
)

const elemExamplePage = `<html><body>
<article class="post" data-id="42">
  <h2> Hello, magpie </h2>
  <a class="tag" href="/t/go">go</a> <a class="tag" href="/t/crawl">crawl</a>
  <span class="votes">17</span>
</article>
</body></html>`

// elemExampleElement stands in for the element an OnHTML("article.post", ...)
// callback receives.
func elemExampleElement() *magpie.HTMLElement {
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(elemExamplePage))
	if err != nil {
		log.Fatal(err)
	}
	s := doc.Find("article.post")
	return magpie.NewHTMLElementFromSelectionNode(&magpie.Response{Request: &magpie.Request{}}, s, s.Nodes[0], 0)
}

func ExampleHTMLElement_ChildText() {
	e := elemExampleElement()
	fmt.Println(e.Attr("data-id"))
	fmt.Println(e.ChildText("h2"))
	fmt.Println(e.ChildTexts("a.tag"))
	fmt.Println(e.ChildAttr("a.tag", "href"))
	fmt.Println(e.ChildAttrs("a.tag", "href"))
	// Output:
	// 42
	// Hello, magpie
	// [go crawl]
	// /t/go
	// [/t/go /t/crawl]
}

func ExampleHTMLElement_ForEach() {
	e := elemExampleElement()
	e.ForEach("a.tag", func(i int, tag *magpie.HTMLElement) {
		fmt.Println(i, tag.Text, tag.Attr("href"))
	})
	// Output:
	// 0 go /t/go
	// 1 crawl /t/crawl
}

func ExampleHTMLElement_Unmarshal() {
	type Post struct {
		ID    int      `attr:"data-id"`
		Title string   `selector:"h2"`
		Tags  []string `selector:"a.tag"`
		Votes int      `selector:".votes"`
	}
	var p Post
	if err := elemExampleElement().Unmarshal(&p); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", p)
	// Output:
	// {ID:42 Title:Hello, magpie Tags:[go crawl] Votes:17}
}

func ExampleHTMLElement_UnmarshalWithMap() {
	var p struct {
		Title string
		Links []string `attr:"href"`
	}
	err := elemExampleElement().UnmarshalWithMap(&p, map[string]string{"Title": "h2", "Links": "a.tag"})
	fmt.Println(p.Title, p.Links, err)
	// Output:
	// Hello, magpie [/t/go /t/crawl] <nil>
}

func ExampleXMLElement_ChildText() {
	doc, err := xmlquery.Parse(strings.NewReader(`<urlset>
  <url><loc> https://example.com/a </loc><priority>0.8</priority></url>
  <url><loc>https://example.com/b</loc></url>
</urlset>`))
	if err != nil {
		log.Fatal(err)
	}
	e := magpie.NewXMLElementFromXMLNode(&magpie.Response{}, xmlquery.FindOne(doc, "/urlset"))
	fmt.Println(e.ChildText("url/loc"))
	fmt.Println(e.ChildTexts("url/loc"))
	fmt.Println(e.ChildTexts("url/lastmod"))
	// Output:
	// https://example.com/a
	// [https://example.com/a https://example.com/b]
	// []
}
