package magpie

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

const elemTestPage = `<!DOCTYPE html>
<html><head><title>Shop</title></head>
<body>
<div id="list" class="list" data-count=" 3 ">
  <h1>  Products  </h1>
  <ul>
    <li class="item" data-id="1"><a href=" /p/1 ">First</a> <span class="price">1.50</span></li>
    <li class="item" data-id="2"><a href="/p/2">Second <b>bold</b></a> <span class="price">2</span></li>
    <li class="item"><a>Third</a><!-- comment --></li>
  </ul>
  <div class="nest">outer <div class="nest">inner</div></div>
  <script>var x = 1;</script>
</div>
</body></html>`

// elemParseDoc parses src into a goquery document.
func elemParseDoc(tb testing.TB, src string) *goquery.Document {
	tb.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(src))
	if err != nil {
		tb.Fatalf("NewDocumentFromReader() error = %v", err)
	}
	return doc
}

// elemTestResponse is a hand-built response, as the collector would pass.
func elemTestResponse(tb testing.TB) *Response {
	tb.Helper()
	u, err := url.Parse("http://127.0.0.1/umShop")
	if err != nil {
		tb.Fatal(err)
	}
	return &Response{StatusCode: 200, Request: &Request{URL: u, Method: "GET"}}
}

// newElemTestElement returns the HTMLElement for the first match of sel in src.
func newElemTestElement(tb testing.TB, src, sel string) *HTMLElement {
	tb.Helper()
	s := elemParseDoc(tb, src).Find(sel).First()
	if s.Length() == 0 {
		tb.Fatalf("Find(%q) matched nothing", sel)
	}
	return NewHTMLElementFromSelectionNode(elemTestResponse(tb), s, s.Nodes[0], 0)
}

func TestHTMLElementConstructor(t *testing.T) {
	resp := elemTestResponse(t)
	doc := elemParseDoc(t, elemTestPage)
	s := doc.Find("li.item").Eq(1)
	e := NewHTMLElementFromSelectionNode(resp, s, s.Nodes[0], 7)
	if e.Name != "li" || e.Index != 7 || e.Response != resp || e.Request != resp.Request || e.DOM != s {
		t.Errorf("NewHTMLElementFromSelectionNode() = %+v, want li at 7 with resp and selection", e)
	}
	if want := s.Text(); e.Text != want {
		t.Errorf("Text = %q, want %q", e.Text, want)
	}
	if got := e.Attr("data-id"); got != "2" {
		t.Errorf("Attr(%q) = %q, want %q", "data-id", got, "2")
	}

	t.Run("nil response and node", func(t *testing.T) {
		e := NewHTMLElementFromSelectionNode(nil, s, nil, 0)
		if e.Name != "li" || e.Request != nil || e.Response != nil || e.Attr("data-id") != "2" {
			t.Errorf("NewHTMLElementFromSelectionNode(nil, s, nil, 0) = %+v, want li from s.Nodes[0]", e)
		}
	})
	t.Run("zero value finds nothing", func(t *testing.T) {
		var e HTMLElement
		if e.Attr("x") != "" || e.ChildText("a") != "" || e.ChildTexts("a") != nil ||
			e.ChildAttr("a", "href") != "" || e.ChildAttrs("a", "href") != nil {
			t.Error("zero HTMLElement helpers found something")
		}
		e.ForEach("a", func(int, *HTMLElement) { t.Error("ForEach called f on a zero HTMLElement") })
		var v struct {
			A string `selector:"a"`
		}
		if err := e.Unmarshal(&v); err != nil {
			t.Errorf("zero HTMLElement Unmarshal() error = %v, want nil", err)
		}
		var nilElem *HTMLElement
		if nilElem.ChildText("a") != "" || nilElem.Attr("a") != "" {
			t.Error("nil *HTMLElement helpers found something")
		}
	})
}

func TestHTMLElementAttr(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	tests := []struct{ key, want string }{
		{"id", "list"},
		{"class", "list"},
		{"data-count", " 3 "}, // Attr does not trim, as Colly.
		{"missing", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := e.Attr(tt.key); got != tt.want {
			t.Errorf("Attr(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestHTMLElementChildText(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	tests := []struct {
		sel  string
		want string
	}{
		{"h1", "Products"},
		{"li.item a", "FirstSecond boldThird"},
		{"span.price", "1.502"},
		{".nest", "outer innerinner"}, // nested matches repeat, as goquery's Find(sel).Text()
		{"li:nth-child(2) b", "bold"},
		{"script", "var x = 1;"},
		{"table", ""},
		{"[[[", ""}, // invalid selector: no match, no panic
		{"", ""},
		{"#list", ""}, // the element itself is not its own descendant
	}
	for _, tt := range tests {
		if got := e.ChildText(tt.sel); got != tt.want {
			t.Errorf("ChildText(%q) = %q, want %q", tt.sel, got, tt.want)
		}
	}
}

func TestHTMLElementChildTexts(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	tests := []struct {
		sel  string
		want []string
	}{
		{"li.item a", []string{"First", "Second bold", "Third"}},
		{".nest", []string{"outer inner", "inner"}},
		{"table", nil},
		{"a[", nil},
	}
	for _, tt := range tests {
		if got := e.ChildTexts(tt.sel); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ChildTexts(%q) = %#v, want %#v", tt.sel, got, tt.want)
		}
	}
}

func TestHTMLElementChildAttr(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	tests := []struct {
		sel, attr string
		want      string
	}{
		{"a", "href", "/p/1"}, // trimmed
		{"li.item", "data-id", "1"},
		{"li.item:last-child", "data-id", ""}, // first match lacks it
		{"li.item a:not([href])", "href", ""},
		{"table", "id", ""},
		{"::", "href", ""},
	}
	for _, tt := range tests {
		if got := e.ChildAttr(tt.sel, tt.attr); got != tt.want {
			t.Errorf("ChildAttr(%q, %q) = %q, want %q", tt.sel, tt.attr, got, tt.want)
		}
	}
}

func TestHTMLElementChildAttrs(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	tests := []struct {
		sel, attr string
		want      []string
	}{
		{"a", "href", []string{"/p/1", "/p/2"}}, // the third link has none
		{"li", "data-id", []string{"1", "2"}},
		{"li", "nope", nil},
		{"table", "id", nil},
		{"a[href=", "href", nil},
	}
	for _, tt := range tests {
		if got := e.ChildAttrs(tt.sel, tt.attr); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ChildAttrs(%q, %q) = %#v, want %#v", tt.sel, tt.attr, got, tt.want)
		}
	}
}

// TestHTMLElementGoqueryParity checks the hand-written matching against
// goquery itself, including selections of several (nested) nodes.
func TestHTMLElementGoqueryParity(t *testing.T) {
	doc := elemParseDoc(t, elemTestPage)
	resp := elemTestResponse(t)
	selections := map[string]*goquery.Selection{
		"one root":     doc.Find("#list"),
		"nested roots": doc.Find("div"),
		"siblings":     doc.Find("li"),
		"document":     doc.Selection,
		"empty":        doc.Find("table"),
	}
	selectors := []string{"a", "li", ".nest", "div", "span.price", "b", "li > a", "*", "[[", ""}
	for name, s := range selections {
		t.Run(name, func(t *testing.T) {
			e := NewHTMLElementFromSelectionNode(resp, s, nil, 0)
			for _, sel := range selectors {
				found := s.Find(sel)
				if got, want := e.ChildText(sel), strings.TrimSpace(found.Text()); got != want {
					t.Errorf("ChildText(%q) = %q, want %q", sel, got, want)
				}
				var wantTexts []string
				found.Each(func(_ int, c *goquery.Selection) { wantTexts = append(wantTexts, strings.TrimSpace(c.Text())) })
				if got := e.ChildTexts(sel); !reflect.DeepEqual(got, wantTexts) {
					t.Errorf("ChildTexts(%q) = %q, want %q", sel, got, wantTexts)
				}
				wantAttr, _ := found.Attr("class")
				if got := e.ChildAttr(sel, "class"); got != strings.TrimSpace(wantAttr) {
					t.Errorf("ChildAttr(%q, class) = %q, want %q", sel, got, wantAttr)
				}
			}
		})
	}
}

func TestHTMLElementForEach(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	var got []string
	e.ForEach("li.item", func(i int, c *HTMLElement) {
		if c.Index != i {
			t.Errorf("ForEach element %d has Index %d", i, c.Index)
		}
		if c.Request != e.Request || c.Response != e.Response {
			t.Errorf("ForEach element %d does not share the request and response", i)
		}
		got = append(got, c.Name+":"+c.Attr("data-id")+":"+c.ChildText("a"))
	})
	want := []string{"li:1:First", "li:2:Second bold", "li::Third"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ForEach(li.item) visited %q, want %q", got, want)
	}

	t.Run("invalid selector", func(t *testing.T) {
		e.ForEach("li[", func(int, *HTMLElement) { t.Error("ForEach(invalid) called f") })
	})
	t.Run("nil func", func(t *testing.T) {
		e.ForEach("li", nil) // must not panic
	})
}

func TestHTMLElementForEachWithBreak(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	tests := []struct {
		stopAt int
		want   int
	}{
		{0, 1},
		{1, 2},
		{99, 3},
	}
	for _, tt := range tests {
		calls := 0
		e.ForEachWithBreak("li", func(i int, _ *HTMLElement) bool {
			calls++
			return i < tt.stopAt
		})
		if calls != tt.want {
			t.Errorf("ForEachWithBreak stopping at %d made %d calls, want %d", tt.stopAt, calls, tt.want)
		}
	}
}

func TestCompileSelectorCache(t *testing.T) {
	if compileSelector("li.item") == nil {
		t.Fatal(`compileSelector("li.item") = nil, want a selector`)
	}
	if _, ok := selectorCache.Load("li.item"); !ok {
		t.Error(`compileSelector("li.item") did not cache the selector`)
	}
	if compileSelector("li[") != nil {
		t.Error(`compileSelector("li[") != nil, want nil for an invalid selector`)
	}
	if compileSelector("li[") != nil {
		t.Error(`compileSelector("li[") from the cache != nil`)
	}
}

func TestHTMLElementAllocations(t *testing.T) {
	e := newElemTestElement(t, elemTestPage, "#list")
	e.ChildText("h1") // warm the selector cache
	e.ChildAttr("a", "href")
	if n := testing.AllocsPerRun(100, func() { e.ChildText("h1") }); n != 0 {
		t.Errorf("ChildText(h1) allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { e.ChildAttr("a", "href") }); n != 0 {
		t.Errorf("ChildAttr(a, href) allocates %v times, want 0", n)
	}
}

var elemSink string

func BenchmarkHTMLElementChildText(b *testing.B) {
	e := newElemTestElement(b, elemTestPage, "#list")
	b.Run("magpie", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			elemSink = e.ChildText("li.item a")
		}
	})
	b.Run("goquery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			elemSink = strings.TrimSpace(e.DOM.Find("li.item a").Text())
		}
	})
}

func BenchmarkHTMLElementChildAttr(b *testing.B) {
	e := newElemTestElement(b, elemTestPage, "#list")
	b.Run("magpie", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			elemSink = e.ChildAttr("li.item a", "href")
		}
	})
	b.Run("goquery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := e.DOM.Find("li.item a").Attr("href")
			elemSink = strings.TrimSpace(v)
		}
	})
}

// FuzzHTMLElementSelector checks that any selector string leaves the helpers
// panic-free and in agreement with goquery.
func FuzzHTMLElementSelector(f *testing.F) {
	for _, s := range []string{"a", "li.item a", ".nest", "[[", "", "*", "li:nth-child(2n+1)", "a[href^='/p']", ":not(", "div > div"} {
		f.Add(s)
	}
	doc := elemParseDoc(f, elemTestPage)
	roots := doc.Find("div")
	e := NewHTMLElementFromSelectionNode(elemTestResponse(f), roots, nil, 0)
	f.Fuzz(func(t *testing.T, sel string) {
		found := roots.Find(sel)
		if got, want := e.ChildText(sel), strings.TrimSpace(found.Text()); got != want {
			t.Errorf("ChildText(%q) = %q, want %q", sel, got, want)
		}
		if got, want := len(e.ChildTexts(sel)), found.Length(); got != want {
			t.Errorf("len(ChildTexts(%q)) = %d, want %d", sel, got, want)
		}
		wantAttr, _ := found.Attr("href")
		if got := e.ChildAttr(sel, "href"); got != strings.TrimSpace(wantAttr) {
			t.Errorf("ChildAttr(%q, href) = %q, want %q", sel, got, wantAttr)
		}
		e.ChildAttrs(sel, "class")
		e.ForEach(sel, func(int, *HTMLElement) {})
	})
}
