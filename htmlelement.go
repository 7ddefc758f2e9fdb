package magpie

import (
	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
)

// HTMLElement is one element matched by an OnHTML selector.
type HTMLElement struct {
	// Name is the tag name.
	Name string
	// Text is the element's text content.
	Text string
	// Request is the request whose response holds the element.
	Request *Request
	// Response is the response that holds the element.
	Response *Response
	// DOM is the goquery selection of the element, for anything the helpers do not cover.
	DOM *goquery.Selection
	// Index is the element's position among the selector's matches, from 0.
	Index int

	attributes []html.Attribute
}

// NewHTMLElementFromSelectionNode returns the HTMLElement for node, matched as s in resp at idx.
func NewHTMLElementFromSelectionNode(resp *Response, s *goquery.Selection, n *html.Node, idx int) *HTMLElement {
	return &HTMLElement{ // STUB
		Name: n.Data, Request: resp.Request, Response: resp, DOM: s, Index: idx, Text: s.Text(), attributes: n.Attr,
	}
}
