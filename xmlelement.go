package magpie

import (
	"strings"

	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"
)

// XMLElement is one node matched by an OnXML XPath expression, in an HTML or an XML document.
//
// Its helpers take XPath expressions evaluated relative to the node. An
// invalid expression, or one that fails while evaluated, matches nothing; it
// never panics. Like HTMLElement, an XMLElement is read-only once built and
// its methods may be called from several goroutines while nobody modifies
// the document. The zero value is usable and finds nothing.
type XMLElement struct {
	// Name is the element name.
	Name string
	// Text is the node's text content.
	Text string
	// Request is the request whose response holds the node.
	Request *Request
	// Response is the response that holds the node.
	Response *Response
	// DOM is the *html.Node or *xmlquery.Node matched.
	DOM any
	// Index is the node's position among the expression's matches, from 0,
	// in XML documents too (Colly leaves it 0 there).
	Index int

	isHTML bool
}

// NewXMLElementFromHTMLNode returns the XMLElement for an HTML node, with
// Text its inner text. A nil resp leaves Request and Response nil; a nil n
// gives an element that finds nothing.
func NewXMLElementFromHTMLNode(resp *Response, n *html.Node) *XMLElement {
	e := &XMLElement{Response: resp, isHTML: true}
	if resp != nil {
		e.Request = resp.Request
	}
	if n != nil {
		e.Name = n.Data
		e.Text = nodeText(n)
		e.DOM = n
	}
	return e
}

// NewXMLElementFromXMLNode returns the XMLElement for an XML node, with Text
// its inner text. A nil resp leaves Request and Response nil; a nil n gives
// an element that finds nothing.
func NewXMLElementFromXMLNode(resp *Response, n *xmlquery.Node) *XMLElement {
	e := &XMLElement{Response: resp}
	if resp != nil {
		e.Request = resp.Request
	}
	if n != nil {
		e.Name = n.Data
		e.Text = n.InnerText()
		e.DOM = n
	}
	return e
}

// Attr returns the value of the node's attribute k, or "" if it has none.
// In XML documents k may be prefixed ("xml:lang"); an unprefixed k matches
// the first attribute with that local name, whatever its prefix.
func (e *XMLElement) Attr(k string) string {
	if e == nil {
		return ""
	}
	switch n := e.DOM.(type) {
	case *html.Node:
		if n != nil {
			v, _ := attrOf(n.Attr, k)
			return v
		}
	case *xmlquery.Node:
		if n != nil {
			v, _ := xmlAttr(n, k)
			return v
		}
	}
	return ""
}

// ChildText returns the trimmed text of the first node that the XPath
// expression xpath selects relative to e, or "" if there is none.
func (e *XMLElement) ChildText(xpath string) string {
	switch n := e.node().(type) {
	case *html.Node:
		if c := queryHTML(n, xpath); c != nil {
			return strings.TrimSpace(nodeText(c))
		}
	case *xmlquery.Node:
		if c := queryXML(n, xpath); c != nil {
			return strings.TrimSpace(c.InnerText())
		}
	}
	return ""
}

// ChildTexts returns the trimmed text of every node that xpath selects
// relative to e, in document order: an empty, non-nil slice if there is none.
func (e *XMLElement) ChildTexts(xpath string) []string {
	switch n := e.node().(type) {
	case *html.Node:
		nodes := queryAllHTML(n, xpath)
		res := make([]string, len(nodes))
		for i, c := range nodes {
			res[i] = strings.TrimSpace(nodeText(c))
		}
		return res
	case *xmlquery.Node:
		nodes := queryAllXML(n, xpath)
		res := make([]string, len(nodes))
		for i, c := range nodes {
			res[i] = strings.TrimSpace(c.InnerText())
		}
		return res
	}
	return []string{}
}

// ChildAttr returns the trimmed value of attribute attr of the first node
// that xpath selects relative to e, or "" if there is no such node or it
// lacks the attribute.
func (e *XMLElement) ChildAttr(xpath, attr string) string {
	switch n := e.node().(type) {
	case *html.Node:
		if c := queryHTML(n, xpath); c != nil {
			v, _ := attrOf(c.Attr, attr)
			return strings.TrimSpace(v)
		}
	case *xmlquery.Node:
		if c := queryXML(n, xpath); c != nil {
			v, _ := xmlAttr(c, attr)
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ChildAttrs returns the trimmed values of attribute attr of every node that
// xpath selects relative to e and that has it, in document order, or nil if
// there is none.
func (e *XMLElement) ChildAttrs(xpath, attr string) []string {
	var res []string
	switch n := e.node().(type) {
	case *html.Node:
		for _, c := range queryAllHTML(n, xpath) {
			if v, ok := attrOf(c.Attr, attr); ok {
				res = append(res, strings.TrimSpace(v))
			}
		}
	case *xmlquery.Node:
		for _, c := range queryAllXML(n, xpath) {
			if v, ok := xmlAttr(c, attr); ok {
				res = append(res, strings.TrimSpace(v))
			}
		}
	}
	return res
}

// node returns e's DOM as a non-nil *html.Node or *xmlquery.Node, or nil.
func (e *XMLElement) node() any {
	if e == nil {
		return nil
	}
	switch n := e.DOM.(type) {
	case *html.Node:
		if n != nil {
			return n
		}
	case *xmlquery.Node:
		if n != nil {
			return n
		}
	}
	return nil
}

// xmlAttr looks attribute k up on n. An attribute node selected by an
// expression such as "//a/@href" answers for its own name.
func xmlAttr(n *xmlquery.Node, k string) (string, bool) {
	if n.Type == xmlquery.AttributeNode {
		if n.Data == k {
			return n.InnerText(), true
		}
		return "", false
	}
	prefix, local, prefixed := strings.Cut(k, ":")
	if !prefixed {
		local = k
	}
	for i := range n.Attr {
		a := &n.Attr[i]
		if a.Name.Local == local && (!prefixed || a.Name.Space == prefix) {
			return a.Value, true
		}
	}
	return "", false
}

// The query helpers turn both ways an XPath expression can fail into "no
// match": antchfx returns compile errors, but it panics on some type errors
// found while evaluating (substring(name, 'a'), replace with a bad regexp),
// and no panic may escape to the crawl that called a helper.

func queryHTML(n *html.Node, expr string) (res *html.Node) {
	defer func() {
		if recover() != nil {
			res = nil
		}
	}()
	c, err := htmlquery.Query(n, expr)
	if err != nil {
		return nil
	}
	return c
}

func queryAllHTML(n *html.Node, expr string) (res []*html.Node) {
	defer func() {
		if recover() != nil {
			res = nil
		}
	}()
	nodes, err := htmlquery.QueryAll(n, expr)
	if err != nil {
		return nil
	}
	return nodes
}

func queryXML(n *xmlquery.Node, expr string) (res *xmlquery.Node) {
	defer func() {
		if recover() != nil {
			res = nil
		}
	}()
	c, err := xmlquery.Query(n, expr)
	if err != nil {
		return nil
	}
	return c
}

func queryAllXML(n *xmlquery.Node, expr string) (res []*xmlquery.Node) {
	defer func() {
		if recover() != nil {
			res = nil
		}
	}()
	nodes, err := xmlquery.QueryAll(n, expr)
	if err != nil {
		return nil
	}
	return nodes
}
