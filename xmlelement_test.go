package magpie

import (
	"reflect"
	"strings"
	"testing"

	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"
)

const elemTestFeed = `<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns:media="http://search.yahoo.com/mrss/" lang="en">
  <title>  Feed  </title>
  <entry id="1"><name>First</name><link href=" /e/1 " rel="alternate"/><media:thumb media:url="t1.png"/></entry>
  <entry id="2"><name>Second <![CDATA[part]]></name><link href="/e/2"/><!-- note --></entry>
  <entry><name>Third</name><link/></entry>
</feed>`

// xmlElements returns the same kind of element for the root of elemTestPage
// (HTML) and elemTestFeed (XML), so both flavours run through one table.
func xmlRoots(t *testing.T) (htmlElem, xmlElem *XMLElement) {
	t.Helper()
	resp := elemTestResponse(t)
	hdoc, err := htmlquery.Parse(strings.NewReader(elemTestPage))
	if err != nil {
		t.Fatalf("htmlquery.Parse() error = %v", err)
	}
	list := htmlquery.FindOne(hdoc, `//div[@id="list"]`)
	if list == nil {
		t.Fatal(`FindOne(//div[@id="list"]) = nil`)
	}
	xdoc, err := xmlquery.Parse(strings.NewReader(elemTestFeed))
	if err != nil {
		t.Fatalf("xmlquery.Parse() error = %v", err)
	}
	feed := xmlquery.FindOne(xdoc, "/feed")
	if feed == nil {
		t.Fatal("FindOne(/feed) = nil")
	}
	return NewXMLElementFromHTMLNode(resp, list), NewXMLElementFromXMLNode(resp, feed)
}

func TestXMLElementConstructors(t *testing.T) {
	h, x := xmlRoots(t)
	if h.Name != "div" || h.Request == nil || h.Response == nil || h.Request != h.Response.Request {
		t.Errorf("NewXMLElementFromHTMLNode() = %+v, want div with request and response", h)
	}
	if want := htmlquery.InnerText(h.DOM.(*html.Node)); h.Text != want {
		t.Errorf("HTML Text = %q, want %q", h.Text, want)
	}
	if x.Name != "feed" || x.Request == nil {
		t.Errorf("NewXMLElementFromXMLNode() = %+v, want feed with request", x)
	}
	if want := x.DOM.(*xmlquery.Node).InnerText(); x.Text != want {
		t.Errorf("XML Text = %q, want %q", x.Text, want)
	}

	t.Run("nil arguments", func(t *testing.T) {
		for _, e := range []*XMLElement{NewXMLElementFromHTMLNode(nil, nil), NewXMLElementFromXMLNode(nil, nil), {}, nil} {
			if e.ChildText("//a") != "" || len(e.ChildTexts("//a")) != 0 || e.ChildAttr("//a", "x") != "" ||
				e.ChildAttrs("//a", "x") != nil || e.Attr("x") != "" {
				t.Errorf("helpers of %+v found something", e)
			}
		}
		if e := NewXMLElementFromXMLNode(nil, nil); e.DOM != nil {
			t.Errorf("NewXMLElementFromXMLNode(nil, nil).DOM = %#v, want nil interface", e.DOM)
		}
	})
}

func TestXMLElementAttr(t *testing.T) {
	h, x := xmlRoots(t)
	tests := []struct {
		name string
		e    *XMLElement
		key  string
		want string
	}{
		{"html", h, "class", "list"},
		{"html untrimmed", h, "data-count", " 3 "},
		{"html missing", h, "nope", ""},
		{"xml", x, "lang", "en"},
		{"xml missing", x, "nope", ""},
		{"xml prefixed", x, "xmlns:media", "http://search.yahoo.com/mrss/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Attr(tt.key); got != tt.want {
				t.Errorf("Attr(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}

func TestXMLElementChildText(t *testing.T) {
	h, x := xmlRoots(t)
	tests := []struct {
		name  string
		e     *XMLElement
		xpath string
		want  string
	}{
		{"html first match", h, "//li/a", "First"},
		{"html trimmed", h, "h1", "Products"},
		{"html nested", h, "//li[2]/a", "Second bold"},
		{"html attribute node", h, "//li[2]/a/@href", "/p/2"},
		{"html no match", h, "//table", ""},
		{"html invalid", h, "//li[", ""},
		{"html empty", h, "", ""},
		{"xml first match", x, "//entry/name", "First"},
		{"xml trimmed", x, "title", "Feed"},
		{"xml cdata", x, "entry[2]/name", "Second part"},
		{"xml attribute node", x, "entry[1]/@id", "1"},
		{"xml no match", x, "//nothing", ""},
		{"xml invalid", x, "entry[@", ""},
		{"xml invalid function", x, "nosuchfn(.)", ""},
		// These compile but make antchfx/xpath panic while evaluating.
		{"xml evaluation panic", x, "entry[substring(name, 'a')]", ""},
		{"html evaluation panic", h, "//li[replace(a, '[', 'x')]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.ChildText(tt.xpath); got != tt.want {
				t.Errorf("ChildText(%q) = %q, want %q", tt.xpath, got, tt.want)
			}
		})
	}
}

func TestXMLElementChildTexts(t *testing.T) {
	h, x := xmlRoots(t)
	tests := []struct {
		name  string
		e     *XMLElement
		xpath string
		want  []string
	}{
		{"html", h, "//li/a", []string{"First", "Second bold", "Third"}},
		{"html none", h, "//table", []string{}},
		{"html invalid", h, "][", []string{}},
		{"xml", x, "entry/name", []string{"First", "Second part", "Third"}},
		{"xml none", x, "//nothing", []string{}},
		{"xml invalid", x, "entry[", []string{}},
		{"xml evaluation panic", x, "entry[substring(name, 'a')]", []string{}},
		{"html evaluation panic", h, "//li[substring(a, 'a')]", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.e.ChildTexts(tt.xpath)
			if got == nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ChildTexts(%q) = %#v, want %#v (non-nil)", tt.xpath, got, tt.want)
			}
		})
	}
}

func TestXMLElementChildAttr(t *testing.T) {
	h, x := xmlRoots(t)
	tests := []struct {
		name        string
		e           *XMLElement
		xpath, attr string
		want        string
	}{
		{"html trimmed", h, "//li/a", "href", "/p/1"},
		{"html missing attr", h, "//li[3]/a", "href", ""},
		{"html no match", h, "//table", "id", ""},
		{"html invalid", h, "((", "href", ""},
		{"xml trimmed", x, "entry/link", "href", "/e/1"},
		{"xml missing attr", x, "entry[3]/link", "href", ""},
		{"xml prefixed", x, "entry/media:thumb", "media:url", "t1.png"},
		{"xml local name", x, "entry/media:thumb", "url", "t1.png"},
		{"xml attribute node", x, "entry/@id", "id", "1"},
		{"xml invalid", x, "((", "href", ""},
		{"xml evaluation panic", x, "entry[replace(name, '[', 'x')]", "id", ""},
		{"html evaluation panic", h, "//li[replace(a, '[', 'x')]", "class", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.ChildAttr(tt.xpath, tt.attr); got != tt.want {
				t.Errorf("ChildAttr(%q, %q) = %q, want %q", tt.xpath, tt.attr, got, tt.want)
			}
		})
	}
}

func TestXMLElementChildAttrs(t *testing.T) {
	h, x := xmlRoots(t)
	tests := []struct {
		name        string
		e           *XMLElement
		xpath, attr string
		want        []string
	}{
		{"html", h, "//li/a", "href", []string{"/p/1", "/p/2"}},
		{"html none", h, "//li", "nope", nil},
		{"html invalid", h, "//li[", "href", nil},
		{"xml", x, "entry/link", "href", []string{"/e/1", "/e/2"}},
		{"xml ids", x, "entry", "id", []string{"1", "2"}},
		{"xml none", x, "entry", "nope", nil},
		{"xml invalid", x, "entry[", "id", nil},
		{"xml evaluation panic", x, "entry[substring(name, 'a')]", "id", nil},
		{"html evaluation panic", h, "//li[substring(a, 'a')]", "class", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.ChildAttrs(tt.xpath, tt.attr); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ChildAttrs(%q, %q) = %#v, want %#v", tt.xpath, tt.attr, got, tt.want)
			}
		})
	}
}

func BenchmarkXMLElementChildText(b *testing.B) {
	xdoc, err := xmlquery.Parse(strings.NewReader(elemTestFeed))
	if err != nil {
		b.Fatal(err)
	}
	x := NewXMLElementFromXMLNode(&Response{}, xmlquery.FindOne(xdoc, "/feed"))
	b.ReportAllocs()
	for b.Loop() {
		elemSink = x.ChildText("entry/name")
	}
}

// FuzzXMLElementXPath checks that no XPath expression makes a helper panic.
func FuzzXMLElementXPath(f *testing.F) {
	for _, s := range []string{"//a", "entry/name", "entry[substring(name, 'a')]", "//li[replace(a, '[', 'x')]", "((", "@id", "count(//a)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		h, x := xmlRoots(t)
		for _, e := range []*XMLElement{h, x} {
			e.ChildText(expr)
			if e.ChildTexts(expr) == nil {
				t.Errorf("ChildTexts(%q) = nil, want non-nil", expr)
			}
			e.ChildAttr(expr, "id")
			e.ChildAttrs(expr, "id")
		}
	})
}
