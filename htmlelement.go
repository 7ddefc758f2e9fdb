package magpie

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// HTMLElement is one element matched by an OnHTML selector.
//
// An HTMLElement is built by the collector for one callback invocation and
// is read-only afterwards; its methods only read the document, so several
// goroutines may call them at once as long as nobody modifies the DOM. The
// zero value is usable: every helper then reports "nothing found".
//
// An element stays valid after its callback returns, with its Request,
// DOM, attributes and Text: the collector cuts a page's elements from one
// allocation but never reuses one, so a callback may keep an element (which
// then keeps the others of its page and callback alive).
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

// NewHTMLElementFromSelectionNode returns the HTMLElement for node n, matched
// as the selection s in resp at position idx. Text is the text of n alone
// (as goquery's Text would give for a selection of n), attributes are n's.
// A nil resp leaves Request and Response nil; a nil n falls back to the
// first node of s, if any.
func NewHTMLElementFromSelectionNode(resp *Response, s *goquery.Selection, n *html.Node, idx int) *HTMLElement {
	e := &HTMLElement{}
	e.init(resp, s, n, idx)
	return e
}

// init fills e as NewHTMLElementFromSelectionNode fills a new element, for
// elements the collector cuts from one slab per page and callback.
func (e *HTMLElement) init(resp *Response, s *goquery.Selection, n *html.Node, idx int) {
	*e = HTMLElement{DOM: s, Index: idx, Response: resp}
	if resp != nil {
		e.Request = resp.Request
	}
	if n == nil && s != nil && len(s.Nodes) > 0 {
		n = s.Nodes[0]
	}
	if n != nil {
		e.Name = n.Data
		e.Text = nodeText(n)
		e.attributes = n.Attr
	}
}

// Attr returns the value of the element's attribute k, or "" if it has none.
func (h *HTMLElement) Attr(k string) string {
	if h == nil {
		return ""
	}
	v, _ := attrOf(h.attributes, k)
	return v
}

// ChildText returns the text of every element matching the CSS selector sel
// under h, concatenated and trimmed of surrounding white space. An invalid
// selector matches nothing.
func (h *HTMLElement) ChildText(sel string) string {
	roots := h.roots()
	m := compileSelector(sel)
	if m == nil || len(roots) == 0 {
		return ""
	}
	var acc textAcc
	if len(roots) == 1 {
		// One root needs no de-duplication, so the matches are streamed
		// straight into the text instead of being collected first.
		acc.matchText(roots[0], m)
	} else {
		for _, n := range findAll(roots, m) {
			acc.node(n)
		}
	}
	return strings.TrimSpace(acc.String())
}

// ChildTexts returns the trimmed text of each element matching the CSS
// selector sel under h, in document order, or nil if none matches.
func (h *HTMLElement) ChildTexts(sel string) []string {
	nodes := h.find(sel)
	if len(nodes) == 0 {
		return nil
	}
	res := make([]string, len(nodes))
	for i, n := range nodes {
		res[i] = strings.TrimSpace(nodeText(n))
	}
	return res
}

// ChildAttr returns the trimmed value of attribute attr of the first element
// matching the CSS selector sel under h, or "" if there is no match or the
// first match lacks the attribute.
func (h *HTMLElement) ChildAttr(sel, attr string) string {
	roots := h.roots()
	m := compileSelector(sel)
	if m == nil || len(roots) == 0 {
		return ""
	}
	n := findFirst(roots, m)
	if n == nil {
		return ""
	}
	v, _ := attrOf(n.Attr, attr)
	return strings.TrimSpace(v)
}

// ChildAttrs returns the trimmed values of attribute attr of every element
// matching the CSS selector sel under h that has it, in document order, or
// nil if there is none.
func (h *HTMLElement) ChildAttrs(sel, attr string) []string {
	var res []string
	for _, n := range h.find(sel) {
		if v, ok := attrOf(n.Attr, attr); ok {
			res = append(res, strings.TrimSpace(v))
		}
	}
	return res
}

// ForEach calls f for every element matching the CSS selector sel under h,
// in document order, with its index among the matches. The elements share
// h's Request and Response.
func (h *HTMLElement) ForEach(sel string, f func(i int, e *HTMLElement)) {
	if f == nil {
		return
	}
	h.ForEachWithBreak(sel, func(i int, e *HTMLElement) bool {
		f(i, e)
		return true
	})
}

// ForEachWithBreak is ForEach that stops as soon as f returns false.
func (h *HTMLElement) ForEachWithBreak(sel string, f func(i int, e *HTMLElement) bool) {
	if h == nil || h.DOM == nil || f == nil {
		return
	}
	m := compileSelector(sel)
	if m == nil {
		return
	}
	h.DOM.FindMatcher(m).EachWithBreak(func(i int, s *goquery.Selection) bool {
		return f(i, NewHTMLElementFromSelectionNode(h.Response, s, s.Nodes[0], i))
	})
}

// Unmarshal fills the struct pointed to by v from h, following the struct
// tags described at UnmarshalHTML.
func (h *HTMLElement) Unmarshal(v any) error {
	return UnmarshalHTML(v, h.selection(), nil)
}

// UnmarshalWithMap is Unmarshal with the selectors of the fields named in
// structMap (Go field name → CSS selector) replacing their selector tags.
// See UnmarshalHTML.
func (h *HTMLElement) UnmarshalWithMap(v any, structMap map[string]string) error {
	return UnmarshalHTML(v, h.selection(), structMap)
}

func (h *HTMLElement) selection() *goquery.Selection {
	if h == nil {
		return nil
	}
	return h.DOM
}

func (h *HTMLElement) roots() []*html.Node {
	if h == nil || h.DOM == nil {
		return nil
	}
	return h.DOM.Nodes
}

// find returns the descendants of h matching sel, as goquery's Find would.
func (h *HTMLElement) find(sel string) []*html.Node {
	roots := h.roots()
	m := compileSelector(sel)
	if m == nil || len(roots) == 0 {
		return nil
	}
	return findAll(roots, m)
}

// attrOf returns the value of the attribute named k and whether it is present.
func attrOf(attrs []html.Attribute, k string) (string, bool) {
	for i := range attrs {
		if attrs[i].Key == k {
			return attrs[i].Val, true
		}
	}
	return "", false
}

// findAll returns the descendants of roots that m matches, in document order
// per root and without duplicates, which is what goquery's Find returns.
func findAll(roots []*html.Node, m cascadia.Matcher) []*html.Node {
	var res []*html.Node
	for _, r := range roots {
		res = appendMatches(res, r, m)
	}
	if len(roots) > 1 && len(res) > 1 {
		// Roots may nest, so a node can be found from two of them.
		seen := make(map[*html.Node]struct{}, len(res))
		out := res[:0]
		for _, n := range res {
			if _, dup := seen[n]; !dup {
				seen[n] = struct{}{}
				out = append(out, n)
			}
		}
		res = out
	}
	return res
}

func appendMatches(dst []*html.Node, n *html.Node, m cascadia.Matcher) []*html.Node {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if m.Match(c) {
			dst = append(dst, c)
		}
		dst = appendMatches(dst, c, m)
	}
	return dst
}

// findFirst returns the first descendant of roots that m matches, or nil.
func findFirst(roots []*html.Node, m cascadia.Matcher) *html.Node {
	for _, r := range roots {
		if n := firstMatch(r, m); n != nil {
			return n
		}
	}
	return nil
}

func firstMatch(n *html.Node, m cascadia.Matcher) *html.Node {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if m.Match(c) {
			return c
		}
		if f := firstMatch(c, m); f != nil {
			return f
		}
	}
	return nil
}

// nodeText returns the text content of n: its text nodes and those of its
// descendants, concatenated, comments excluded (goquery's Text).
func nodeText(n *html.Node) string {
	var acc textAcc
	acc.node(n)
	return acc.String()
}

// textAcc concatenates text node data. Most elements hold a single text node,
// so the first piece is kept as is and a builder is used only from the second
// one on: the common case allocates nothing.
type textAcc struct {
	first string
	count int
	b     strings.Builder
}

func (a *textAcc) add(s string) {
	if s == "" {
		return
	}
	switch a.count {
	case 0:
		a.first = s
	case 1:
		a.b.Grow(len(a.first) + len(s))
		a.b.WriteString(a.first)
		a.b.WriteString(s)
	default:
		a.b.WriteString(s)
	}
	a.count++
}

// node adds the text of n and its descendants.
func (a *textAcc) node(n *html.Node) {
	if n.Type == html.TextNode {
		a.add(n.Data)
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		a.node(c)
	}
}

// matchText adds the text of every descendant of n that m matches, in
// document order. A match nested in another match is added again, exactly as
// goquery's Find(sel).Text() repeats it.
func (a *textAcc) matchText(n *html.Node, m cascadia.Matcher) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if m.Match(c) {
			a.node(c)
		}
		a.matchText(c, m)
	}
}

func (a *textAcc) String() string {
	if a.count <= 1 {
		return a.first
	}
	return a.b.String()
}

// selectorCacheMax bounds the compiled-selector cache. Selectors are almost
// always literals in the user's code, so a few hundred cover a crawl; past the
// bound selectors are compiled on every call rather than growing memory.
const selectorCacheMax = 1024

var (
	// selectorCache maps a CSS selector string to its cascadia.Selector, or to
	// a nil Selector when the string does not compile.
	selectorCache     sync.Map
	selectorCacheSize atomic.Int64
)

// compileSelector returns the compiled form of the CSS selector sel, or nil
// if sel is not a valid selector (which then matches nothing, as in goquery).
// Compiling is far dearer than matching, and OnHTML callbacks call ChildText
// and the like with the same selectors on every page, hence the cache.
func compileSelector(sel string) cascadia.Selector {
	if v, ok := selectorCache.Load(sel); ok {
		return v.(cascadia.Selector)
	}
	m, err := cascadia.Compile(sel)
	if err != nil {
		m = nil
	}
	if selectorCacheSize.Load() < selectorCacheMax {
		if _, loaded := selectorCache.LoadOrStore(sel, m); !loaded {
			selectorCacheSize.Add(1)
		}
	}
	return m
}
