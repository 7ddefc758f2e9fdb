package magpie

import (
	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"
)

// XMLElement is one node matched by an OnXML XPath expression, in an HTML or an XML document.
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

// NewXMLElementFromHTMLNode returns the XMLElement for an HTML node.
func NewXMLElementFromHTMLNode(resp *Response, n *html.Node) *XMLElement {
	return &XMLElement{Name: n.Data, Request: resp.Request, Response: resp, DOM: n, isHTML: true} // STUB
}

// NewXMLElementFromXMLNode returns the XMLElement for an XML node.
func NewXMLElementFromXMLNode(resp *Response, n *xmlquery.Node) *XMLElement {
	return &XMLElement{Name: n.Data, Request: resp.Request, Response: resp, DOM: n, Text: n.InnerText()} // STUB
}
