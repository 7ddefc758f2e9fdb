package magpie

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// streamSelectorSets are the OnHTML selectors the differential test and the
// fuzz target register, one collector per set: links and metadata, nested
// blocks (matches inside matches), tables with their implied parts, and
// lists of compound selectors.
var streamSelectorSets = [][]string{
	{"a[href]", "img[src]", "link[rel]", "meta[name]", "title", "base[href]"},
	{"div", "p", "li", "span", "pre", "code", "textarea", "script"},
	{"table", "tbody", "tr", "td", "th", "dt", "dd", "colgroup", "col"},
	{"h1, h2, h3", "div.section[id]", "section", "a.reference[href^=http]", "span#x, em, b, i, strong", "form, input, option, button"},
}

// observed is what the callbacks of one page saw: a line per element of
// what the HTMLElement's fields and helpers gave, and the elements.
type observed struct {
	lines []string
	nodes []*html.Node
}

// observeHTML runs body through a collector with one OnHTML callback per
// selector and returns what the callbacks saw, and whether the page was
// streamed.
func observeHTML(tb testing.TB, body []byte, selectors []string, stream bool) (observed, bool) {
	tb.Helper()
	c := NewCollector()
	var out observed
	for _, sel := range selectors {
		c.OnHTML(sel, func(e *HTMLElement) {
			var line strings.Builder
			fmt.Fprintf(&line, "%s #%d <%s> text=%q attrs=%q href=%q child=%q childAttrs=%q abs=%q",
				sel, e.Index, e.Name, e.Text, e.attributes, e.Attr("href"), e.ChildText("a, b, span"),
				e.ChildAttrs("[href]", "href"), e.Request.AbsoluteURL("rel/x"))
			e.ForEach("li, td", func(i int, ce *HTMLElement) {
				fmt.Fprintf(&line, " each %d <%s> %d", i, ce.Name, len(ce.Text))
			})
			out.lines = append(out.lines, line.String())
			out.nodes = append(out.nodes, e.DOM.Nodes[0])
		})
	}
	req, err := c.newRequest("http://127.0.0.1:1/dir/page.html", http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	resp := &Response{StatusCode: 200, Body: body, Headers: &h, Request: req, Ctx: req.Ctx}
	// As the analysis stage runs them: one callback region per page.
	c.markCallbacksFor(req, func() {
		if err := c.runResponseCallbacks(resp, stream); err != nil {
			out.lines = append(out.lines, fmt.Sprintf("error: %v", err))
		}
	})
	return out, c.Stats().HTMLStreamed == 1
}

// sameTree reports where the subtrees at a and b first differ, or "".
func sameTree(a, b *html.Node) string {
	if a.Type != b.Type || a.Data != b.Data || a.DataAtom != b.DataAtom || a.Namespace != b.Namespace || !slices.Equal(a.Attr, b.Attr) {
		var ra, rb bytes.Buffer
		html.Render(&ra, a)
		html.Render(&rb, b)
		return fmt.Sprintf("stream %.300q\nparse  %.300q", ra.String(), rb.String())
	}
	ca, cb := a.FirstChild, b.FirstChild
	for ca != nil && cb != nil {
		if d := sameTree(ca, cb); d != "" {
			return d
		}
		ca, cb = ca.NextSibling, cb.NextSibling
	}
	if ca != nil || cb != nil {
		return fmt.Sprintf("<%s>: children differ in number", a.Data)
	}
	return ""
}

// compareStream checks that a streamed page gives what the parsed page
// gives: every callback's view of every element, and each element's
// subtree node by node. It reports whether the page was streamed.
func compareStream(t *testing.T, name string, body []byte, selectors []string) bool {
	t.Helper()
	got, streamed := observeHTML(t, body, selectors, true)
	if !streamed {
		return false
	}
	want, _ := observeHTML(t, body, selectors, false)
	for i := range max(len(got.lines), len(want.lines)) {
		if i >= len(got.lines) || i >= len(want.lines) {
			t.Errorf("%s, selectors %q: streamed %d elements, parsed %d", name, selectors, len(got.lines), len(want.lines))
			return true
		}
		if got.lines[i] != want.lines[i] {
			t.Errorf("%s, selectors %q: element %d differs:\nstream: %.400s\nparse:  %.400s", name, selectors, i, got.lines[i], want.lines[i])
			return true
		}
		if d := sameTree(got.nodes[i], want.nodes[i]); d != "" {
			t.Errorf("%s, selectors %q: element %d (%s) differs in its subtree:\n%s", name, selectors, i, got.lines[i][:min(80, len(got.lines[i]))], d)
			return true
		}
	}
	return true
}

// streamCases are pages that exercise each rule of the streamer: the
// parsed result is the reference. stream tells, for each of
// streamSelectorSets, whether the page is expected to stream (y) or not (n).
var streamCases = []struct {
	name   string
	html   string
	stream string
}{
	{"plain", `<!DOCTYPE html><html><head><title>T</title><base href="/b/"></head><body><p>x <a href="a">A <b>bold</b></a></p></body></html>`, "yyyy"},
	{"implied p", `<p>one<p>two<div>three</div><ul><li>a<li>b</ul><dl><dt>t<dd>d</dl>`, "yyyy"},
	{"p closed by block inside span", `<p><span>x<div>y</div></span>z`, "yyyy"},
	{"pre newline", "<pre>\nkeep\n</pre><textarea>\n\nt</textarea><listing>\r\nl</listing>", "yyyy"},
	{"table implied tbody", `<table><tr><td>a<td>b<tr><th>c</table><p>after`, "yyyy"},
	{"table sections", "<table>\n<colgroup><col><col></colgroup>\n<thead><tr><th>h</th></tr></thead><tbody><tr><td><p>c<div>d</div></td></tr></tbody></table>", "yyyy"},
	{"cell closes formatting", `<table><tr><td><b>x<td>y</table><p>z`, "yyyy"},
	{"raw text", `<script>if (a<b) { x = "</p>" }</script><style>p{}</style><title>a &amp; b</title><noscript><a href=x>n</a></noscript>`, "yyyy"},
	{"after body", "<body><div>x</div></body>\n<!--c--> <p>more</p></html> <!--d-->", "yyyy"},
	{"unclosed at end", `<div class=section id=s><p>open <a href=x>link`, "yyyy"},
	{"comments and void", `<div><!-- c --><br/><img src=i.png><input type=text value=v></div>`, "yyyy"},
	{"form twice", `<form><input name=a><form><input name=b></form><input name=c>`, "yyyy"},
	{"stray end tags", `<div></span><p>x</em></p></div></b>`, "yyyy"},
	{"headings", `<h1>a<h2>b</h1><h3>c</h3>`, "yyyy"},
	{"misnested formatting", `<p><b>bold<i>both</b>italic</i></p>`, "nnnn"},
	{"formatting across block", `<b>x<p>y</b>z</p>`, "nnnn"},
	{"nested a", `<a href=1>one<a href=2>two</a>`, "nnnn"},
	{"fostered text", `<table>text<tr><td>x</td></tr></table>`, "nnnn"},
	{"quirks table in p", `<p><table><tr><td>x</td></tr></table>`, "nnnn"},
	{"svg named by a selector", `<div><svg><title>t</title><a href=x/></svg></div>`, "nyyn"},
	{"svg in a match", `<div class=section id=s><form><svg viewBox="0 0 2 2" xlink:href=x><title>t &amp; u</title><path d="M0 0"/><clippath id=c><![CDATA[ x<y ]]></clippath><style>a{}</style></svg></form></div>`, "nyyy"},
	{"svg outside matches", `<p><svg><rect/></svg><a href=x>x</a></p>`, "yyyy"},
	{"svg broken out of", `<svg><path><p>para</p></svg>`, "nnnn"},
	{"svg html in title", `<svg><title><b>x</b></title></svg>`, "nnnn"},
	{"svg closed by html end tag", `<div><svg><g></div><p>x`, "nnnn"},
	{"svg unclosed", `<div><svg><g><text>t`, "yyyy"},
	{"template", `<template><a href=x>t</a></template>`, "nnnn"},
	{"end p without p", `<div></p></div>`, "nnnn"},
	{"nul", "<p>a\x00b</p>", "nnnn"},
	{"br end tag", `<div></br></div>`, "nnnn"},
	{"formatting reconstructed after li", `<ul><li><b>x<li>y</ul>`, "nnnn"},
	{"formatting attributes sorted", `<div><b id=z class=a data-x=1>x</b><a title=t href=h class=c>l</a></div>`, "yyyy"},
	{"text joined across ignored tags", `<div>a</span>b<!--c-->d</div>`, "yyyy"},
	{"self-closing non-void", `<div/>inside<span/>more</div>`, "yyyy"},
	{"form pointer kept", `<div><form id=a></div><form id=b><input name=x></form>`, "yyyy"},
	{"form end closes p", `<form><p>x</form>y`, "yyyy"},
	{"li through span", `<ul><li><span>a<li>b</ul>`, "yyyy"},
	{"options and buttons", `<option>a<option>b<button>c<button>d`, "yyyy"},
	{"script in table", `<table><script>x</script><style></style><tr><td>a</td></tr></table>`, "yyyy"},
	{"link in table in link", `<a href=1><table><tr><td><a href=2>x</a></td></tr></table></a>`, "yyyy"},
	{"caption", `<table><caption>c</caption><tr><td>x</table>`, "nnnn"},
	// A cell that closes over an open object, applet or marquee clears the
	// parser's list of formatting elements only back to that element's
	// marker: the formatting elements before it stay and are rebuilt
	// around later text.
	{"cell end over open marquee", `<table><tr><td><a href=/x><marquee>news</td></tr></table><p>one</p><p>two <a href=/y>y</a></p>`, "nnnn"},
	{"cell start over open object", `<table><tr><td><b><object>x<td>y</table><p>z`, "nnnn"},
	{"table end over open applet", `<table><tr><td><i><applet>a</table>b`, "nnnn"},
	{"row end over open marquee", `<table><tr><td><marquee>a</tr></table><p>b`, "nnnn"},
	{"object closed inside its cell", `<table><tr><td><b>c<object><i>x</object>y</b></td></tr></table><p>z`, "yyyy"},
	{"marquee end clears its formatting", `<div><marquee><b>x<i>y</marquee>z</div>`, "yyyy"},
	{"object in cell of nested table", `<table><tr><td><object><table><tr><td><b>x</td></tr></table></object></td></tr></table><p>y`, "yyyy"},
	{"nobr twice", `<nobr>a<nobr>b`, "nnnn"},
	{"many fragments joined into one text", "<div>" + strings.Repeat("a</x>&amp;", 20000) + "</div>", "yyyy"},
	{"deep but within the parser's limit", strings.Repeat("<div>", 400) + "x", "yyyy"},
	{"deeper than the parser allows", strings.Repeat("<div>", 600) + "x", "nnnn"},
}

// checkRawTagNames checks that the streamer's tag names, read from the raw
// tokens, are the tokenizer's own (TagName) for every tag of body.
func checkRawTagNames(t *testing.T, body []byte) {
	t.Helper()
	s := &streamer{z: html.NewTokenizer(bytes.NewReader(body))}
	for {
		tt := s.z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken && tt != html.EndTagToken {
			continue
		}
		got := string(s.rawTagName(tt == html.EndTagToken))
		name, _ := s.z.TagName()
		if want := string(bytes.ReplaceAll(name, []byte("\ufffd"), []byte{0})); got != want && got != string(name) {
			t.Errorf("tag %q: raw name %q, TagName %q", s.z.Raw(), got, name)
		}
	}
}

func TestStreamHTMLCases(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			checkRawTagNames(t, []byte(tc.html))
			for i, sels := range streamSelectorSets {
				streamed := compareStream(t, tc.name, []byte(tc.html), sels)
				if want := tc.stream[i] == 'y'; streamed != want {
					t.Errorf("streamed = %v, want %v (selectors %q)", streamed, want, sels)
				}
			}
		})
	}
}

// TestStreamHTMLNeedsWholeDocument: selectors that look outside their
// element, OnXML and the option off all parse the page whole.
func TestStreamHTMLNeedsWholeDocument(t *testing.T) {
	for _, sel := range []string{"div a", "ul > li", "h2 + p", "li:first-child", "*", "[href]", "body", "html", `a[href="x\"y"]`, "a:not([href])", "a[href=1]"} {
		if tags, ok := streamTags(sel); ok {
			t.Errorf("streamTags(%q) = %q, true; want false", sel, tags)
		}
	}
	for sel, want := range map[string][]string{
		"a[href]":                 {"a"},
		"A.x#y[rel~=next]":        {"a"},
		"img[src], link[rel='x']": {"img", "link"},
		" tr , td ":               {"tr", "td"},
		`a[ title = "a,b" ]`:      {"a"},
	} {
		if tags, ok := streamTags(sel); !ok || !slices.Equal(tags, want) {
			t.Errorf("streamTags(%q) = %q, %v; want %q", sel, tags, ok, want)
		}
	}
	body := []byte(`<div><a href="x">x</a></div>`)
	if _, streamed := observeHTML(t, body, []string{"div a"}, true); streamed {
		t.Error("a descendant selector was streamed")
	}
	if _, streamed := observeHTML(t, body, []string{"a[href]"}, false); streamed {
		t.Error("streamed without StreamHTML")
	}
	c := NewCollector(StreamHTML())
	c.OnHTML("a[href]", func(*HTMLElement) {})
	c.OnXML("//a", func(*XMLElement) {})
	req, err := c.newRequest("http://127.0.0.1:1/", http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"text/html"}}
	if err := c.runResponseCallbacks(&Response{StatusCode: 200, Body: body, Headers: &h, Request: req, Ctx: req.Ctx}, true); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.HTMLStreamed != 0 || st.HTMLParsedWhole != 0 {
		t.Errorf("with OnXML registered: streamed %d, parsed whole %d; want 0, 0", st.HTMLStreamed, st.HTMLParsedWhole)
	}
}

// htmlCorpusGlobs find the HTML manuals Debian installs with python3-doc and
// postgresql-doc (whatever their versions); .ci/run installs them.
var htmlCorpusGlobs = []string{"/usr/share/doc/python3*/html", "/usr/share/doc/postgresql-doc-*/html"}

// TestStreamHTMLCorpus is the differential test over real pages: every
// manual page that streams gives each callback what parsing it gives, and
// most pages stream.
func TestStreamHTMLCorpus(t *testing.T) {
	files := htmlCorpus(t)
	if raceOn || testing.Short() {
		// A sample: the streamer runs on one goroutine, so the race
		// detector adds nothing here but time; .ci/run also runs the
		// whole corpus without it.
		var sample []string
		for i := 0; i < len(files); i += 8 {
			sample = append(sample, files[i])
		}
		files = sample
	}
	streamed, tried := 0, 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sels := range streamSelectorSets {
			tried++
			if compareStream(t, f, body, sels) {
				streamed++
			}
		}
		if t.Failed() {
			break
		}
	}
	t.Logf("%d of %d page and selector-set pairs streamed (%d files)", streamed, tried, len(files))
	if streamed*10 < tried*8 {
		t.Errorf("only %d of %d streamed; the streamer gives up on pages it should follow", streamed, tried)
	}
}

// FuzzStreamHTML compares the streamed and the parsed result on any input:
// whenever the streamer does not give up, it must agree with html.Parse.
func FuzzStreamHTML(f *testing.F) {
	for _, tc := range streamCases {
		f.Add([]byte(tc.html), uint8(0))
	}
	f.Add(benchPage("http://127.0.0.1:1", 3, 40), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, set uint8) {
		checkRawTagNames(t, body)
		compareStream(t, "fuzz input", body, streamSelectorSets[int(set)%len(streamSelectorSets)])
	})
}
