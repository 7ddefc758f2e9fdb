package magpie

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The whole document without html.Parse's cost. A page whose OnHTML
// callbacks need the tree (a Colly program as is) is parsed into one; for
// the pages StreamHTML's streamer follows, the streamer builds that tree
// itself: every node, from the Document down, as html.Parse builds it, but
// cut from a few slabs per page. Each text and attribute value is its own
// string, as html.Parse's are: one a callback keeps does not keep the page.
// What comes before the body (the doctype, comments, the
// explicit or implied html and head, the head's elements and white space)
// follows the parser's first insertion modes here; the body is the
// streamer's, with every element built; after </body> comments go to html
// or the document. Where the streamer gives up, so does streamTree, and the
// caller parses the page with html.Parse. The differential tests over real
// manuals and html5lib's tree-construction inputs, and FuzzStreamTree, hold
// the tree to html.Parse's, node for node.

// Insertion modes before the body, as x/net/html names them.
const (
	treeInitial = iota
	treeBeforeHTML
	treeBeforeHead
	treeInHead
	treeAfterHead
	treeInBody
)

// treeBuilder is the whole-document mode of a streamer for one page.
type treeBuilder struct {
	s                     *streamer
	mode                  int
	doc, html, head, body *html.Node
}

// streamTree returns body's document as html.Parse would build it; ok is
// false when the page needs html.Parse. The nodes are the page's own: none
// is reused for another page, so a callback may keep any of them.
func streamTree(body []byte) (doc *html.Node, ok bool) {
	if bytes.IndexByte(body, 0) >= 0 {
		return nil, false // NUL handling differs by insertion mode
	}
	s := streamers.Get().(*streamer)
	defer s.release()
	s.z, s.body = s.tokenizer(body), body
	// A page has 0.9 to 1.5 nodes per "<" (the manuals 0.95, the bench
	// page 1.4), and at most one attribute per "=": one slab of each for
	// most pages.
	s.nodes = make([]html.Node, 0, 8+bytes.Count(body, []byte{'<'})*3/2)
	if n := bytes.Count(body, []byte{'='}); n > 0 {
		s.attrs = make([]html.Attribute, 0, n)
	}
	b := treeBuilder{s: s}
	b.doc = s.newNode()
	b.doc.Type = html.DocumentNode
	// The node content goes to when no element is open; the document
	// until there is an html element, so that attributes are read.
	s.root = b.doc
	for {
		tt, at := s.next()
		if tt == html.ErrorToken {
			if !s.atEOF() {
				return nil, false
			}
			b.finish()
			return b.doc, true
		}
		if !b.token(tt, at) || s.bad || len(s.stack)+len(s.svg) > maxStreamDepth {
			return nil, false
		}
	}
}

func (b *treeBuilder) token(tt html.TokenType, at int) bool {
	s := b.s
	switch {
	case len(s.svg) > 0:
		return s.foreign(tt)
	case s.text:
		return b.rawText(tt, at)
	}
	switch tt {
	case html.TextToken:
		return b.text(b.textOf(at))
	case html.CommentToken:
		b.comment(string(s.z.Text()))
	case html.DoctypeToken:
		return b.doctype()
	case html.StartTagToken, html.SelfClosingTagToken:
		return b.start(s.readTag(), tt == html.SelfClosingTagToken, at)
	case html.EndTagToken:
		return b.end(tagOf(s.rawTagName(true)))
	}
	return true
}

// textOf returns the current text token's text: a copy of the page's own
// bytes unless the tokenizer changes them (character references, carriage
// returns; the page has no NUL). Each text is its own string, as
// html.Parse's are, so that one a callback keeps (an element's Text) does
// not keep the whole page alive.
func (b *treeBuilder) textOf(at int) string {
	raw := b.s.z.Raw()
	if bytes.IndexByte(raw, '&') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return string(raw)
	}
	return string(b.s.z.Text())
}

// rawText is the content and end of a raw text or RCDATA element, which
// the tokenizer gives as one text token and its end tag.
func (b *treeBuilder) rawText(tt html.TokenType, at int) bool {
	s := b.s
	switch tt {
	case html.TextToken:
		d := b.textOf(at)
		if t := s.top(); t.atom == atom.Textarea && t.node.FirstChild == nil {
			d = trimLeadingNewline(d)
		}
		s.addText(d)
		return true
	case html.EndTagToken:
		s.pop(len(s.stack) - 1)
		s.text = false
		return true
	}
	return false
}

// implied takes the step each mode before the body takes for a token it
// does not handle: the implied html, head, end of head or body.
func (b *treeBuilder) implied() {
	s := b.s
	switch b.mode {
	case treeBeforeHTML:
		b.html = b.element(tag{atom: atom.Html, name: "html"}, b.doc)
		s.root = b.html
	case treeBeforeHead:
		b.head = b.element(tag{atom: atom.Head, name: "head"}, b.html)
		s.root = b.head
	case treeInHead:
		s.root = b.html
	case treeAfterHead:
		b.body = b.element(tag{atom: atom.Body, name: "body"}, b.html)
		s.root = b.body
	}
	b.mode++
}

// element appends an element for t to parent.
func (b *treeBuilder) element(t tag, parent *html.Node) *html.Node {
	n := b.s.newNode()
	n.Type, n.DataAtom, n.Data, n.Attr = html.ElementNode, t.atom, t.name, t.attrs
	parent.AppendChild(n)
	return n
}

// finish builds what the parser implies at the end of the page: the html,
// head and body it has not seen.
func (b *treeBuilder) finish() {
	for b.mode < treeInBody {
		if b.mode == treeInitial {
			b.mode++
		}
		b.implied()
	}
}

func (b *treeBuilder) text(d string) bool {
	s := b.s
	for b.mode < treeInBody {
		switch b.mode {
		case treeInitial, treeBeforeHTML, treeBeforeHead:
			// White space is dropped.
			if d = strings.TrimLeft(d, whitespace); d == "" {
				return true
			}
		default:
			// In and after the head, it is kept where it is.
			rest := strings.TrimLeft(d, whitespace)
			s.addText(d[:len(d)-len(rest)])
			if rest == "" {
				return true
			}
			d = rest
		}
		if b.mode == treeInitial {
			b.mode++
			continue
		}
		b.implied()
	}
	if s.after > 0 && strings.TrimLeft(d, whitespace) != "" {
		s.after = 0
	}
	return s.textIn(s.mode(), d)
}

func (b *treeBuilder) comment(d string) {
	s := b.s
	parent := s.parent()
	switch {
	case b.mode <= treeBeforeHTML || b.mode == treeInBody && s.after == 2:
		parent = b.doc
	case b.mode == treeInBody && s.after == 1:
		parent = b.html
	}
	n := s.newNode()
	n.Type, n.Data = html.CommentNode, d
	parent.AppendChild(n)
}

// doctype adds the doctype node at the start of the page; the parser
// ignores one anywhere else.
func (b *treeBuilder) doctype() bool {
	s := b.s
	if b.mode == treeInBody && s.after == 1 {
		s.after = 0
	}
	if b.mode != treeInitial {
		return true
	}
	b.mode = treeBeforeHTML
	var n *html.Node
	// Text unescapes and converts the tokenizer's buffer in place, which
	// Raw then shows: it is called only where it changes nothing.
	raw := s.z.Raw()
	plain := !bytes.ContainsAny(raw, "&\r")
	var d []byte
	if plain {
		d = s.z.Text()
	}
	switch {
	case plain && string(d) == "html":
		n = s.newNode()
		n.Type, n.Data = html.DoctypeNode, "html"
	case plain && !bytes.ContainsAny(d, whitespace):
		n = s.newNode()
		n.Type, n.Data = html.DoctypeNode, strings.ToLower(string(d))
	default:
		// Public and system identifiers, character references: x/net/html
		// reads them, from the doctype's own bytes.
		doc, err := html.Parse(bytes.NewReader(raw))
		if err != nil || doc.FirstChild == nil || doc.FirstChild.Type != html.DoctypeNode {
			return false
		}
		n = doc.FirstChild
		doc.RemoveChild(n)
	}
	b.doc.AppendChild(n)
	return true
}

// mergeAttrs adds to an html or body element the attributes of a later
// start tag of that name that it does not have yet, as the parser does.
func mergeAttrs(dst *html.Node, t tag) {
next:
	for _, a := range t.attrs {
		for _, d := range dst.Attr {
			if d.Key == a.Key {
				continue next
			}
		}
		dst.Attr = append(dst.Attr, a)
	}
}

func (b *treeBuilder) start(t tag, selfClosing bool, at int) bool {
	s := b.s
	for b.mode < treeInBody {
		switch b.mode {
		case treeBeforeHTML:
			if t.atom == atom.Html {
				b.html = b.element(t, b.doc)
				s.root = b.html
				b.mode++
				return true
			}
		case treeBeforeHead:
			switch t.atom {
			case atom.Head:
				b.head = b.element(t, b.html)
				s.root = b.head
				b.mode++
				return true
			case atom.Html:
				mergeAttrs(b.html, t)
				return true
			}
		case treeInHead:
			switch t.atom {
			case atom.Html:
				mergeAttrs(b.html, t)
				return true
			case atom.Head:
				return true
			case atom.Template:
				return false
			}
			if b.inHead(t) {
				return true
			}
		case treeAfterHead:
			switch t.atom {
			case atom.Html:
				mergeAttrs(b.html, t)
				return true
			case atom.Body:
				b.body = b.element(t, b.html)
				s.root = b.body
				b.mode++
				return true
			case atom.Head:
				return true
			case atom.Frameset, atom.Template:
				return false
			case atom.Noscript:
				// Not a head element after the head: the body's.
			default:
				// Head elements after the head still go into it.
				s.root = b.head
				in := b.inHead(t)
				s.root = b.html
				if in {
					return true
				}
			}
		}
		if b.mode == treeInitial {
			b.mode++
			continue
		}
		b.implied()
	}
	return b.startInBody(t, selfClosing, at)
}

// inHead inserts the elements that belong in the head under the current
// root; it reports false for any other.
func (b *treeBuilder) inHead(t tag) bool {
	s := b.s
	switch t.atom {
	case atom.Base, atom.Basefont, atom.Bgsound, atom.Link, atom.Meta:
		s.insert(t, true)
	case atom.Noscript, atom.Script, atom.Title, atom.Noframes, atom.Style:
		s.insert(t, false)
		s.text = true
	default:
		return false
	}
	return true
}

func (b *treeBuilder) startInBody(t tag, selfClosing bool, at int) bool {
	s := b.s
	if s.after > 0 && t.atom == atom.Html {
		mergeAttrs(b.html, t)
		return true
	}
	s.after = 0
	switch t.atom {
	case atom.Html, atom.Body:
		// The streamer ignores them; their attributes go to the open html
		// or body where the parser is in the body's rules.
		if len(t.attrs) == 0 {
			break
		}
		if m := s.mode(); m != modeBody && m != modeCell {
			return false
		}
		if t.atom == atom.Html {
			mergeAttrs(b.html, t)
		} else {
			mergeAttrs(b.body, t)
		}
		return true
	case atom.Svg:
		if m := s.mode(); m == modeBody || m == modeCell {
			return s.startSVG(selfClosing, at)
		}
	}
	return s.start(t)
}

func (b *treeBuilder) end(t tag) bool {
	s := b.s
	for b.mode < treeInBody {
		switch a := t.atom; {
		case a == atom.Template && b.mode >= treeInHead:
			return false // the parser's template rules
		case a == atom.Head && b.mode == treeInHead:
			s.root = b.html
			b.mode++
			return true
		case a == atom.Body || a == atom.Html || a == atom.Br || a == atom.Head && b.mode < treeInHead:
			// The mode's implied step, then the tag again.
		case b.mode != treeInitial:
			return true // ignored
		}
		if b.mode == treeInitial {
			b.mode++
			continue
		}
		b.implied()
	}
	if s.after > 0 {
		if t.atom == atom.Html {
			s.after = 2
			return true
		}
		s.after = 0
	}
	return s.end(t)
}
