package magpie

import (
	"bytes"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxHTMLNesting is how deep flattenHTML lets elements nest: below
// x/net/html's limit of 512 open elements, with room for the ones the parser
// adds itself (html, body, tbody, ...).
const maxHTMLNesting = 400

// flattenHTML rewrites body so that no element is nested deeper than max:
// an element that would open past that depth first closes the innermost open
// one, so that the excess nesting becomes a run of siblings, and the end tag
// of the element closed early is dropped when it comes. Every element, link
// and text of the page is kept; only the depth changes.
func flattenHTML(body []byte, max int) []byte {
	z := html.NewTokenizer(bytes.NewReader(body))
	var out bytes.Buffer
	out.Grow(len(body) + len(body)/8)
	var open []string          // names of the elements kept open, innermost last
	closed := map[string]int{} // end tags still to drop, by name
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return out.Bytes()
		case html.StartTagToken:
			name, _ := z.TagName()
			if voidElement(atom.Lookup(name)) {
				break
			}
			if len(open) >= max {
				inner := open[len(open)-1]
				open = open[:len(open)-1]
				out.WriteString("</" + inner + ">")
				closed[inner]++
			}
			open = append(open, string(name))
		case html.EndTagToken:
			name, _ := z.TagName()
			if n := closed[string(name)]; n > 0 {
				closed[string(name)] = n - 1
				continue
			}
			for i := len(open) - 1; i >= 0; i-- {
				if open[i] == string(name) {
					open = open[:i]
					break
				}
			}
		}
		out.Write(z.Raw())
	}
}

// voidElement reports elements that never have content or an end tag.
func voidElement(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr:
		return true
	}
	return false
}
