package magpie

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// matchTreePages are pages whose top level holds more than the html
// element (a doctype, comments before and after it), with <base> in the
// head, in the body, twice or not at all.
var matchTreePages = []string{
	`<!DOCTYPE html><!-- a --><html><head><base href="/b/"><title>T</title></head><body><a href="x">x</a><p><a href=y>y</a></p></body></html><!-- z -->`,
	`<p><a>no href</a><a href="1">1</a><base href="/late/"><base href="/later/"><div><div><a href="2"><span>2</span></a></div></div>`,
	`<table><tr><td><a href=c>c</a></td></tr></table><ul><li>one<li>two <a href=/d>d</a></ul>`,
	``,
	`just text`,
}

// TestMatchTree: the one walk finds, for every selector, the nodes
// goquery's Find finds, in the same order, and the <base href>
// cascadia.Query finds.
func TestMatchTree(t *testing.T) {
	pages := slices.Clone(matchTreePages)
	for _, tc := range streamCases {
		pages = append(pages, tc.html)
	}
	pages = append(pages, string(benchPage("http://127.0.0.1:1", 3, 40)))
	// A few real manuals when they are installed (see TestStreamHTMLCorpus).
	for _, glob := range htmlCorpusGlobs {
		files, _ := filepath.Glob(filepath.Join(glob, "*.html"))
		for _, f := range files[:min(len(files), 5)] {
			if b, err := os.ReadFile(f); err == nil {
				pages = append(pages, string(b))
			}
		}
	}
	var sels []string
	for _, set := range streamSelectorSets {
		sels = append(sels, set...)
	}
	sels = append(sels, "*", "html", "body > p", ":root", "head base")
	for i, page := range pages {
		root, err := html.Parse(strings.NewReader(page))
		if err != nil {
			continue // too deep to parse: its case is flattening's
		}
		doc := goquery.NewDocumentFromNode(root)
		wantBase := cascadia.Query(root, baseHrefMatcher)
		for _, sel := range sels {
			m := cascadia.MustCompile(sel)
			want := doc.FindMatcher(m).Nodes
			got, base := matchTree(root, m, true)
			if !slices.Equal(got, want) {
				t.Errorf("page %d: matchTree(%q) = %d nodes, want the %d Find gives", i, sel, len(got), len(want))
			}
			if base != wantBase {
				t.Errorf("page %d: matchTree(%q) base = %v, want %v", i, sel, base, wantBase)
			}
			if _, base := matchTree(root, m, false); base != nil {
				t.Errorf("page %d: matchTree(%q, findBase false) found a base", i, sel)
			}
		}
	}
}

// TestParsedCallbacksSeeEarlierChanges: on a parsed page each OnHTML
// callback's elements are found when its turn comes, as Colly's doc.Find
// per callback finds them: an element an earlier callback removed from the
// tree is not matched by a later one, and one it added is.
func TestParsedCallbacksSeeEarlierChanges(t *testing.T) {
	c := NewCollector()
	c.OnHTML("body", func(e *HTMLElement) {
		e.DOM.Find("a.gone").Remove()
		e.DOM.AppendHtml(`<a class="new" href="/n">n</a>`)
	})
	var got []string
	c.OnHTML("a[href]", func(e *HTMLElement) { got = append(got, e.Attr("href")) })
	body := []byte(`<html><head><base href="/b/"></head><body><a href="/k">k</a><a class="gone" href="/g">g</a></body></html>`)
	resp := newAnalyzeResponse(t, c, body)
	var abs string
	c.OnScraped(func(r *Response) { abs = r.Request.AbsoluteURL("x") })
	c.markCallbacksFor(resp.Request, func() {
		if err := c.runResponseCallbacks(resp, false); err != nil {
			t.Errorf("runResponseCallbacks: %v", err)
		}
	})
	if want := []string{"/k", "/n"}; !slices.Equal(got, want) {
		t.Errorf("a[href] saw %q, want %q", got, want)
	}
	if want := "http://127.0.0.1:1/b/x"; abs != want {
		t.Errorf("AbsoluteURL after <base href=/b/> = %q, want %q", abs, want)
	}
}

// newAnalyzeResponse is body as the analysis stage receives an HTML page
// from http://127.0.0.1:1/dir/page.html.
func newAnalyzeResponse(tb testing.TB, c *Collector, body []byte) *Response {
	tb.Helper()
	req, err := c.newRequest("http://127.0.0.1:1/dir/page.html", http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	return &Response{StatusCode: 200, Body: body, Headers: &h, Request: req, Ctx: req.Ctx}
}
