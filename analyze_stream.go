package magpie

import (
	"bytes"
	"cmp"
	"io"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// StreamHTML's analysis: the OnHTML selectors are matched while the page is
// tokenized, and only the matched elements (with what they contain) are
// built, instead of the whole document.
//
// The elements must be exactly those html.Parse would build, so the streamer
// follows x/net/html's tree construction for the pages where a tree is the
// plain nesting of the tags: the implied end tags of p, li, dd, dt and table
// cells, implied tbody and tr, the newline after <pre>, raw text elements,
// text after </body>. Where the parser would move or rebuild what was already
// built (adoption of misnested formatting elements, formatting elements a
// cell closed over an open object leaves to be rebuilt, foster parenting out
// of a table, foreign content, templates, quirks-mode tables, an open stack
// deeper than the parser allows), the streamer gives up and the page is parsed whole,
// before any callback ran. The differential test over real manuals and a fuzz
// target hold it to html.Parse's result.

// streamPage is what streamHTML found: for each OnHTML callback, the
// elements it matched in document order; and the first <base href>.
type streamPage struct {
	// root is the empty document node the matched elements' selections
	// share.
	root    *html.Node
	matches [][]*html.Node
	base    string
	hasBase bool
}

// maxStreamDepth stays below x/net/html's 512 open elements (with html and
// body), past which html.Parse fails and the page is flattened.
const maxStreamDepth = 500

// sframe is one open element.
type sframe struct {
	atom atom.Atom
	name string // the tag name; only when atom is 0
	// node is the element when it lies in a matched subtree, else nil.
	node *html.Node
	id   uint32
}

type streamer struct {
	z    *html.Tokenizer
	cbs  []*htmlCallback
	tags []string // every tag name a selector names
	// stack is the parser's stack of open elements above html and body.
	stack []sframe
	ids   uint32
	// tables counts the open table elements (table, its sections, rows,
	// cells and colgroup): without any, the mode is the body's.
	tables int
	// form is the id of the parser's form element pointer (0: none).
	form uint32
	// after is 1 after </body>, 2 after </html>: comments then go outside
	// the body.
	after int
	// text is set inside a raw text or RCDATA element, whose content the
	// tokenizer returns as one text token before the end tag.
	text bool
	// bad is set when the page turned out not to stream after all.
	bad bool
	// svg holds the open SVG elements (lower-cased names) while the
	// tokenizer is inside an <svg>; svgParent is where the svg goes when it
	// lies in a match, svgAt where its start tag begins in the body.
	svg       []string
	svgParent *html.Node
	svgAt     int
	// joined holds the text of text nodes that more text was joined to,
	// written into the nodes when the page ends.
	joined map[*html.Node][]byte
	// name is rawTagName's buffer.
	name []byte
	// nodes and attrs are slabs the page's built nodes and their
	// attributes are cut from, a few allocations a page instead of one or
	// two an element. Nothing is reused: a callback may keep a node, which
	// then keeps its slab.
	nodes []html.Node
	attrs []html.Attribute
	// built counts the nodes and attributes this page cut from its slabs;
	// hint is what the last page this streamer read cut, the size of the
	// next page's first slabs (the pages of one site are alike: one slab
	// each instead of several).
	built, hint struct{ nodes, attrs int }
	// attrBuf gathers a tag's attributes before they go to the slab.
	attrBuf []html.Attribute
	// rd reads the page for z.
	rd bytes.Reader
	// tok is z, a copy of fresh for each page; fresh is a tokenizer that
	// has read nothing yet, made once for the streamer, reading rd. The copy
	// starts on fresh's 4 KB read buffer, so that a page does not allocate
	// one (x/net/html has no Reset).
	tok, fresh html.Tokenizer
	// body is the page; off the offset of the token after the current one.
	body []byte
	off  int
	out  streamPage
	// root is where content goes when no element is open: nil when
	// matching (nothing outside a match is built); in streamTree's
	// whole-document mode the document, html, head or body.
	root *html.Node
}

// streamHTML matches cbs in body. ok is false when the page needs the whole
// document: nothing was run and the caller parses it.
func streamHTML(body []byte, cbs []*htmlCallback, tags []string) (page streamPage, ok bool) {
	if bytes.IndexByte(body, 0) >= 0 {
		return page, false // NUL handling differs by insertion mode
	}
	s := streamers.Get().(*streamer)
	defer s.release()
	s.z, s.cbs, s.tags, s.body = s.tokenizer(body), cbs, tags, body
	s.out.matches = make([][]*html.Node, len(cbs))
	for {
		tt, at := s.next()
		if tt == html.ErrorToken {
			if !s.atEOF() {
				return page, false
			}
			s.out.root = s.newNode()
			s.out.root.Type = html.DocumentNode
			return s.out, true
		}
		ok := false
		if len(s.svg) > 0 {
			ok = s.foreign(tt)
		} else {
			ok = s.token(tt, at)
		}
		if !ok || s.bad || len(s.stack)+len(s.svg) > maxStreamDepth {
			return page, false
		}
	}
}

// next reads the next token; at is where it begins in the body.
func (s *streamer) next() (tt html.TokenType, at int) {
	// As the parser does: CDATA sections only inside foreign content.
	s.z.AllowCDATA(len(s.svg) > 0)
	tt = s.z.Next()
	at = s.off
	s.off += len(s.z.Raw())
	return tt, at
}

// atEOF reports whether the error token just read is the page's clean end
// (an open svg in a match is parsed then); the text joined into nodes is
// written into them.
func (s *streamer) atEOF() bool {
	if s.z.Err() != io.EOF || len(s.svg) > 0 && !s.endSVG() {
		return false
	}
	for n, b := range s.joined {
		n.Data = string(b)
	}
	return true
}

// streamers are reused from page to page for their own buffers (the open
// elements, the tag name, the attributes being read, the reader), which die
// with the page; what a streamer builds for the callbacks (nodes,
// attributes, matches) is made fresh for each page and never reused.
var streamers = sync.Pool{New: func() any {
	s := &streamer{stack: make([]sframe, 0, 32)}
	s.fresh = *html.NewTokenizer(&s.rd)
	return s
}}

// tokenizer returns a tokenizer of body that has read nothing: s.tok, a
// copy of s.fresh (see there).
func (s *streamer) tokenizer(body []byte) *html.Tokenizer {
	s.rd.Reset(body)
	s.tok = s.fresh
	return &s.tok
}

// release clears s of the page, keeping only its buffers, and returns it
// to streamers.
func (s *streamer) release() {
	// Cleared to their capacity: what a page left there is not kept alive.
	clear(s.stack[:cap(s.stack)])
	clear(s.attrBuf[:cap(s.attrBuf)])
	clear(s.svg[:cap(s.svg)])
	s.rd.Reset(nil)
	hint := s.built
	*s = streamer{stack: s.stack[:0], name: s.name[:0], attrBuf: s.attrBuf[:0], svg: s.svg[:0], rd: s.rd, fresh: s.fresh, hint: hint}
	streamers.Put(s)
}

// foreign follows the parser inside an <svg>. The svg's elements are not
// matched (a page where a selector names one of them does not stream); when
// the svg lies in a match, x/net/html itself parses it (endSVG) once its end
// is found, so the foreign elements' adjusted names and attributes are the
// parser's own. Anything that makes the parser leave the svg other than its
// end tag, or read HTML inside it, makes the page parse whole.
func (s *streamer) foreign(tt html.TokenType) bool {
	top := s.svg[len(s.svg)-1]
	switch tt {
	case html.StartTagToken, html.SelfClosingTagToken:
		n := string(s.rawTagName(false))
		switch {
		case top == "title" || top == "desc" || top == "foreignobject":
			return false // an HTML integration point: its tags are HTML
		case svgBreakout(n) || n == "font" || n == "base" || s.named(n):
			return false
		}
		// The parser keeps the tokenizer out of raw text inside foreign
		// content (an SVG <title> or <style>).
		s.z.NextIsNotRawText()
		if tt == html.StartTagToken {
			s.svg = append(s.svg, n)
		}
	case html.EndTagToken:
		name := s.rawTagName(true)
		for i := len(s.svg) - 1; i >= 0; i-- {
			if strings.EqualFold(s.svg[i], string(name)) {
				s.svg = s.svg[:i]
				if i == 0 {
					return s.endSVG()
				}
				return true
			}
		}
		return false // an HTML end tag closing through the svg
	}
	return true // text, comments: kept by endSVG's parse
}

// endSVG ends an svg: one that lies in a match is parsed from its bytes.
func (s *streamer) endSVG() bool {
	s.svg = s.svg[:0]
	parent := s.svgParent
	s.svgParent = nil
	if parent == nil {
		return true
	}
	nodes, err := html.ParseFragment(bytes.NewReader(s.body[s.svgAt:s.off]), &html.Node{Type: html.ElementNode, DataAtom: atom.Body, Data: "body"})
	if err != nil || len(nodes) != 1 || nodes[0].Namespace != "svg" {
		return false
	}
	parent.AppendChild(nodes[0])
	return true
}

// svgBreakout reports the HTML tags that end foreign content.
func svgBreakout(name string) bool {
	switch name {
	case "b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em", "embed",
		"h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing", "menu", "meta", "nobr",
		"ol", "p", "pre", "ruby", "s", "small", "span", "strong", "strike", "sub", "sup", "table", "tt", "u", "ul", "var":
		return true
	}
	return false
}

func (s *streamer) top() *sframe {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// parent is the node new content is appended to: outside every open
// element, root (nil when matching: outside every match).
func (s *streamer) parent() *html.Node {
	if t := s.top(); t != nil {
		return t.node
	}
	return s.root
}

func (s *streamer) token(tt html.TokenType, at int) bool {
	if s.text {
		switch tt {
		case html.TextToken:
			t := s.top()
			if t.node == nil {
				return true
			}
			d := string(s.z.Text())
			if t.atom == atom.Textarea && t.node.FirstChild == nil {
				d = trimLeadingNewline(d)
			}
			s.addText(d)
			return true
		case html.EndTagToken:
			s.pop(len(s.stack) - 1)
			s.text = false
			return true
		}
		return false // the tokenizer ends raw text only with its end tag
	}
	// A tag's name can be read once: read it here for every path below.
	var t tag
	switch tt {
	case html.StartTagToken, html.SelfClosingTagToken:
		t = s.readTag()
	case html.EndTagToken:
		t = tagOf(s.rawTagName(true))
	}
	if s.after > 0 {
		// After </body> (1) or </html> (2): comments go outside the body,
		// white space and <html> change nothing, anything else resumes
		// the body.
		switch tt {
		case html.CommentToken:
			return true
		case html.DoctypeToken:
			if s.after == 1 {
				s.after = 0
			}
			return true
		case html.TextToken:
			d := string(s.z.Text())
			if strings.TrimLeft(d, whitespace) != "" {
				s.after = 0
			}
			return s.textIn(s.mode(), d)
		case html.StartTagToken, html.SelfClosingTagToken:
			if t.atom == atom.Html {
				return true
			}
		case html.EndTagToken:
			if t.atom == atom.Html {
				s.after = 2
				return true
			}
		}
		s.after = 0
	}
	switch tt {
	case html.TextToken:
		mode := s.mode()
		if mode == modeBody && s.parent() == nil {
			return true // text outside every match is not kept
		}
		return s.textIn(mode, string(s.z.Text()))
	case html.CommentToken:
		if p := s.parent(); p != nil {
			p.AppendChild(&html.Node{Type: html.CommentNode, Data: string(s.z.Text())})
		}
		return true
	case html.StartTagToken, html.SelfClosingTagToken:
		if m := s.mode(); t.atom == atom.Svg && (m == modeBody || m == modeCell) {
			return s.startSVG(tt == html.SelfClosingTagToken, at)
		}
		return s.start(t)
	case html.EndTagToken:
		return s.end(t)
	}
	return true // doctype: ignored in the body
}

// startSVG enters an <svg> in the body (see foreign).
func (s *streamer) startSVG(selfClosing bool, at int) bool {
	if s.named("svg") {
		return false
	}
	s.svgParent, s.svgAt = s.parent(), at
	s.svg = append(s.svg[:0], "svg")
	if selfClosing {
		return s.endSVG()
	}
	return true
}

// tag is a start or end tag as the tokenizer gave it.
type tag struct {
	atom  atom.Atom
	name  string
	attrs []html.Attribute
	// read tells whether attrs were read (a tag outside every match whose
	// name no selector names is not).
	read bool
}

func tagOf(name []byte) tag {
	if a := atom.Lookup(name); a != 0 {
		return tag{atom: a, name: a.String()}
	}
	return tag{name: string(name)}
}

// rawTagName returns the current tag token's name, lower-cased, as
// Tokenizer.TagName would: read from the raw token into a buffer the
// streamer reuses, where TagName copies every name (the page has no NUL,
// which TagName would replace). end tells an end tag ("</name").
func (s *streamer) rawTagName(end bool) []byte {
	raw := s.z.Raw()
	i := 1
	if end {
		i = 2
	}
	raw = raw[min(i, len(raw)):]
	if j := bytes.IndexAny(raw, " \n\r\t\f/>"); j >= 0 {
		raw = raw[:j]
	}
	s.name = append(s.name[:0], raw...)
	for i, c := range s.name {
		if 'A' <= c && c <= 'Z' {
			s.name[i] = c + 'a' - 'A'
		}
	}
	return s.name
}

// readTag reads a start tag; its attributes only when the element may be
// built: inside a match, named by a selector, or <base>.
func (s *streamer) readTag() tag {
	name := s.rawTagName(false)
	t := tagOf(name)
	need := s.parent() != nil || t.atom == atom.Base || s.named(t.name)
	switch t.atom {
	case atom.Tr, atom.Td, atom.Th:
		// An implied tbody or tr a selector names becomes their parent.
		need = need || s.named("tbody") || s.named("tr")
	}
	if !need {
		return t
	}
	t.read = true
	// TagAttr alone, without TagName first, which only copies the name
	// again. Attribute keys are never empty, so a nil key means none.
	s.attrBuf = s.attrBuf[:0]
	if s.plainAttrs(len(name)) {
		t.attrs = s.keepAttrs()
		return t
	}
	s.attrBuf = s.attrBuf[:0]
	for more := true; more; {
		var k, v []byte
		k, v, more = s.z.TagAttr()
		if k == nil {
			break
		}
		s.attrBuf = append(s.attrBuf, html.Attribute{Key: atom.String(k), Val: string(v)})
	}
	t.attrs = s.keepAttrs()
	return t
}

// plainAttrs reads the current start tag's attributes straight from its raw
// bytes into attrBuf when they are written plainly: lower-case names of
// letters, digits, "-", "_", ":" and ".", each alone or with a double-quoted
// value, separated by white space, no "&" or carriage return anywhere in the
// tag (so nothing to unescape or convert) and no name twice. The tokenizer
// reads such a tag the same way; TagAttr would copy each name and value
// once more before the value's string is made. nameLen is the tag name's
// length. It reports false, with attrBuf in any state, for anything else.
func (s *streamer) plainAttrs(nameLen int) bool {
	raw := s.z.Raw()
	if bytes.IndexByte(raw, '&') >= 0 || bytes.IndexByte(raw, '\r') >= 0 {
		return false
	}
	i := 1 + nameLen
	for {
		start := i
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\t' || raw[i] == '\f') {
			i++
		}
		if i >= len(raw) {
			return false
		}
		switch {
		case raw[i] == '>':
			return true
		case raw[i] == '/':
			return i+2 == len(raw) && raw[i+1] == '>'
		case i == start:
			return false // no space before an attribute
		}
		k := i
		for i < len(raw) && plainNameByte(raw[i]) {
			i++
		}
		key := raw[k:i]
		if len(key) == 0 || i >= len(raw) {
			return false
		}
		var val string
		if raw[i] == '=' {
			if i+1 >= len(raw) || raw[i+1] != '"' {
				return false
			}
			end := bytes.IndexByte(raw[i+2:], '"')
			if end < 0 {
				return false
			}
			val = string(raw[i+2 : i+2+end])
			i += 3 + end
		}
		for _, a := range s.attrBuf {
			if a.Key == string(key) {
				return false
			}
		}
		s.attrBuf = append(s.attrBuf, html.Attribute{Key: atom.String(key), Val: val})
	}
}

func plainNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.'
}

func (s *streamer) named(name string) bool {
	for _, t := range s.tags {
		if t == name {
			return true
		}
	}
	return false
}

// Insertion modes, as the parser derives them from the open elements.
const (
	modeBody = iota
	modeTable
	modeTableBody
	modeRow
	modeCell
	modeColgroup
)

func (s *streamer) mode() int {
	if s.tables == 0 {
		return modeBody
	}
	for i := len(s.stack) - 1; i >= 0; i-- {
		switch s.stack[i].atom {
		case atom.Td, atom.Th:
			return modeCell
		case atom.Tr:
			return modeRow
		case atom.Tbody, atom.Thead, atom.Tfoot:
			return modeTableBody
		case atom.Colgroup:
			return modeColgroup
		case atom.Table:
			return modeTable
		}
	}
	return modeBody
}

const whitespace = " \t\r\n\f"

func (s *streamer) textIn(mode int, d string) bool {
	switch mode {
	case modeTable, modeTableBody, modeRow:
		if strings.Trim(d, whitespace) != "" {
			return false // foster parented out of the table
		}
		s.addText(d)
		return true
	case modeColgroup:
		rest := strings.TrimLeft(d, whitespace)
		s.addText(d[:len(d)-len(rest)])
		return rest == ""
	}
	if t := s.top(); t != nil && (t.atom == atom.Pre || t.atom == atom.Listing) && t.node != nil && t.node.FirstChild == nil {
		d = trimLeadingNewline(d)
	}
	s.addText(d)
	return true
}

func trimLeadingNewline(d string) string {
	d = strings.TrimPrefix(d, "\r")
	return strings.TrimPrefix(d, "\n")
}

// addText appends text to the current node, joining a text node before it
// as the parser does.
func (s *streamer) addText(d string) {
	p := s.parent()
	if p == nil || d == "" {
		return
	}
	if last := p.LastChild; last != nil && last.Type == html.TextNode {
		// Joined in a buffer, not string by string: a page of many
		// fragments (a</x>a</x>...) must not cost the square of its size.
		if s.joined == nil {
			s.joined = map[*html.Node][]byte{}
		}
		b, ok := s.joined[last]
		if !ok {
			b = []byte(last.Data)
		}
		s.joined[last] = append(b, d...)
		return
	}
	n := s.newNode()
	n.Type, n.Data = html.TextNode, d
	p.AppendChild(n)
}

// newNode returns a zero node cut from the page's slab.
func (s *streamer) newNode() *html.Node {
	if len(s.nodes) == cap(s.nodes) {
		s.nodes = make([]html.Node, 0, slabSize(s.hint.nodes, s.built.nodes, 16, 128))
	}
	s.built.nodes++
	s.nodes = s.nodes[:len(s.nodes)+1]
	return &s.nodes[len(s.nodes)-1]
}

// slabSize is the length of a new slab for a page that has cut built
// items so far where the last page cut hint: what the hint says is left,
// or, past the hint, as many as the page has cut (its slabs double); at
// least least and at most most.
func slabSize(hint, built, least, most int) int {
	want := hint - built
	if want <= 0 {
		want = built
	}
	return min(max(want, least), most)
}

// keepAttrs moves a tag's attributes from attrBuf to the page's slab, with
// the capacity of their number, so that an append to one never writes into
// the next.
func (s *streamer) keepAttrs() []html.Attribute {
	k := len(s.attrBuf)
	if k == 0 {
		return nil
	}
	if cap(s.attrs)-len(s.attrs) < k {
		s.attrs = make([]html.Attribute, 0, max(slabSize(s.hint.attrs, s.built.attrs, 8, 256), k))
	}
	s.built.attrs += k
	i := len(s.attrs)
	s.attrs = append(s.attrs, s.attrBuf...)
	return s.attrs[i : i+k : i+k]
}

// insert adds an element for t under the current node and pushes it unless
// it is void. The node is built when it lies in a match or matches itself.
func (s *streamer) insert(t tag, void bool) {
	var n *html.Node
	parent := s.parent()
	if parent != nil && !t.read {
		s.bad = true // its attributes were not read; cannot happen
		return
	}
	if t.read {
		if isFormatting(t.atom) {
			// x/net/html sorts a formatting element's attributes, to
			// compare them with those of the elements it may rebuild.
			slices.SortFunc(t.attrs, func(a, b html.Attribute) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Val, b.Val))
			})
		}
		n = s.newNode()
		n.Type, n.DataAtom, n.Data, n.Attr = html.ElementNode, t.atom, t.name, t.attrs
		matched := false
		for i, cb := range s.cbs {
			if cb.matcher.Match(n) {
				if s.out.matches[i] == nil {
					s.out.matches[i] = make([]*html.Node, 0, 16)
				}
				s.out.matches[i] = append(s.out.matches[i], n)
				matched = true
			}
		}
		if t.atom == atom.Base && !s.out.hasBase {
			if v, ok := attrOf(t.attrs, "href"); ok {
				s.out.base, s.out.hasBase = v, true
			}
		}
		if parent != nil {
			parent.AppendChild(n)
		} else if !matched {
			n = nil
		}
	}
	if void {
		return
	}
	s.ids++
	f := sframe{atom: t.atom, node: n, id: s.ids}
	if isTablePart(t.atom) {
		s.tables++
	}
	if t.atom == 0 {
		f.name = t.name
	}
	s.stack = append(s.stack, f)
}

// pop closes the open elements from index i up.
func (s *streamer) pop(i int) {
	for _, f := range s.stack[i:] {
		if isTablePart(f.atom) {
			s.tables--
		}
	}
	s.stack = s.stack[:i]
}

func isTablePart(a atom.Atom) bool {
	switch a {
	case atom.Table, atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr, atom.Td, atom.Th, atom.Colgroup:
		return true
	}
	return false
}

// popChecked is pop where the parser keeps the popped formatting elements
// in its list of active formatting elements: it would rebuild them around
// later content, so the page cannot stream.
func (s *streamer) popChecked(i int) bool {
	for _, f := range s.stack[i:] {
		if isFormatting(f.atom) {
			return false
		}
	}
	s.pop(i)
	return true
}

// Scopes, as the parser's "has an element in scope".
const (
	scopeDefault = iota
	scopeListItem
	scopeButton
	scopeTable
)

// inScope returns the index of the highest open element among match that is
// in scope, or -1.
func (s *streamer) inScope(sc int, match ...atom.Atom) int {
	for i := len(s.stack) - 1; i >= 0; i-- {
		a := s.stack[i].atom
		for _, m := range match {
			if a == m {
				return i
			}
		}
		switch sc {
		case scopeListItem:
			if a == atom.Ol || a == atom.Ul {
				return -1
			}
		case scopeButton:
			if a == atom.Button {
				return -1
			}
		case scopeTable:
			if a == atom.Table || a == atom.Template {
				return -1
			}
			continue
		}
		switch a {
		case atom.Applet, atom.Caption, atom.Table, atom.Td, atom.Th, atom.Marquee, atom.Object, atom.Template, atom.Select:
			return -1
		}
	}
	return -1
}

// impliedEnd pops p, li, dd, dt and the like off the top.
func (s *streamer) impliedEnd() {
	i := len(s.stack)
	for i > 0 {
		switch s.stack[i-1].atom {
		case atom.Dd, atom.Dt, atom.Li, atom.Optgroup, atom.Option, atom.P, atom.Rb, atom.Rp, atom.Rt, atom.Rtc:
			i--
			continue
		}
		break
	}
	s.pop(i)
}

// closeP closes a p in button scope, as most block start tags do.
func (s *streamer) closeP() bool {
	if i := s.inScope(scopeButton, atom.P); i >= 0 {
		return s.popChecked(i)
	}
	return true
}

func (s *streamer) start(t tag) bool {
	switch s.mode() {
	case modeTable:
		return s.startInTable(t)
	case modeTableBody:
		switch t.atom {
		case atom.Tr:
			s.insert(t, false)
			return true
		case atom.Td, atom.Th:
			s.insert(tag{atom: atom.Tr, name: "tr", read: true}, false)
			return s.start(t)
		case atom.Caption, atom.Col, atom.Colgroup, atom.Tbody, atom.Tfoot, atom.Thead:
			s.pop(len(s.stack) - 1)
			return s.start(t)
		}
		return s.startInTable(t)
	case modeRow:
		switch t.atom {
		case atom.Td, atom.Th:
			s.insert(t, false)
			return true
		case atom.Caption, atom.Col, atom.Colgroup, atom.Tbody, atom.Tfoot, atom.Thead, atom.Tr:
			s.pop(len(s.stack) - 1)
			return s.start(t)
		}
		return s.startInTable(t)
	case modeCell:
		switch t.atom {
		case atom.Caption, atom.Col, atom.Colgroup, atom.Tbody, atom.Td, atom.Tfoot, atom.Th, atom.Thead, atom.Tr:
			return s.closeCell() && s.start(t)
		}
	case modeColgroup:
		switch t.atom {
		case atom.Html:
			return true
		case atom.Col:
			s.insert(t, true)
			return true
		case atom.Template:
			return false
		}
		s.pop(len(s.stack) - 1)
		return s.start(t)
	}
	return s.startInBody(t)
}

func (s *streamer) startInTable(t tag) bool {
	switch t.atom {
	case atom.Colgroup, atom.Tbody, atom.Tfoot, atom.Thead:
		s.insert(t, false)
		return true
	case atom.Td, atom.Th, atom.Tr:
		s.insert(tag{atom: atom.Tbody, name: "tbody", read: true}, false)
		return s.start(t)
	case atom.Style, atom.Script:
		s.insert(t, false)
		s.text = true
		return true
	}
	return false // caption, col, nested tables, forms, fostered content
}

// closeCell ends the open td or th; the formatting elements inside it leave
// the parser's list with it.
func (s *streamer) closeCell() bool {
	if i := s.inScope(scopeTable, atom.Td, atom.Th); i >= 0 {
		return s.popCell(i)
	}
	return true
}

// popCell closes the cell at index i. The parser then clears its list of
// active formatting elements back to the last marker only: when an applet,
// marquee or object is still open inside the cell, that is the marker of
// the innermost one, so the formatting elements between the cell and it
// (and the cell's own marker) stay on the list after they left the stack,
// to be rebuilt around later text. The streamer does not rebuild them: such
// a page parses whole.
func (s *streamer) popCell(i int) bool {
	for _, f := range s.stack[i+1:] {
		if isMarker(f.atom) {
			return false
		}
	}
	s.pop(i)
	return true
}

func (s *streamer) startInBody(t tag) bool {
	switch t.atom {
	case atom.Html, atom.Body, atom.Head,
		atom.Caption, atom.Col, atom.Colgroup, atom.Frame, atom.Tbody, atom.Td, atom.Tfoot, atom.Th, atom.Thead, atom.Tr:
		return true // merged into html or body, or ignored
	case atom.Frameset, atom.Plaintext, atom.Image, atom.Select, atom.Math, atom.Svg, atom.Template,
		atom.Rb, atom.Rtc, atom.Rp, atom.Rt:
		return false
	case atom.Base, atom.Basefont, atom.Bgsound, atom.Link, atom.Meta,
		atom.Area, atom.Br, atom.Embed, atom.Img, atom.Keygen, atom.Wbr, atom.Input,
		atom.Param, atom.Source, atom.Track:
		s.insert(t, true)
	case atom.Noframes, atom.Script, atom.Style, atom.Title, atom.Textarea, atom.Iframe, atom.Noembed, atom.Noscript:
		s.insert(t, false)
		s.text = true
	case atom.Xmp:
		if !s.closeP() {
			return false
		}
		s.insert(t, false)
		s.text = true
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Details, atom.Dialog, atom.Dir,
		atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Header, atom.Hgroup,
		atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.P, atom.Search, atom.Section, atom.Summary, atom.Ul,
		atom.Pre, atom.Listing:
		if !s.closeP() {
			return false
		}
		s.insert(t, false)
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if !s.closeP() {
			return false
		}
		switch s.top().atomOr() {
		case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
			s.pop(len(s.stack) - 1)
		}
		s.insert(t, false)
	case atom.Form:
		if s.form != 0 {
			return true // the parser ignores a form inside a form
		}
		if !s.closeP() {
			return false
		}
		s.insert(t, false)
		s.form = s.ids
	case atom.Li, atom.Dd, atom.Dt:
		for i := len(s.stack) - 1; i >= 0; i-- {
			a := s.stack[i].atom
			if a == t.atom || t.atom != atom.Li && (a == atom.Dd || a == atom.Dt) {
				if !s.popChecked(i) {
					return false
				}
				break
			}
			if a != atom.Address && a != atom.Div && a != atom.P && isSpecial(a) {
				break
			}
		}
		if !s.closeP() {
			return false
		}
		s.insert(t, false)
	case atom.Hr:
		if !s.closeP() {
			return false
		}
		s.insert(t, true)
	case atom.Button:
		if i := s.inScope(scopeDefault, atom.Button); i >= 0 && !s.popChecked(i) {
			return false
		}
		s.insert(t, false)
	case atom.A:
		// A second <a> inside an open one runs the adoption agency.
		for i := len(s.stack) - 1; i >= 0 && !isMarker(s.stack[i].atom); i-- {
			if s.stack[i].atom == atom.A {
				return false
			}
		}
		s.insert(t, false)
	case atom.Nobr:
		if s.inScope(scopeDefault, atom.Nobr) >= 0 {
			return false
		}
		s.insert(t, false)
	case atom.Table:
		if s.inScope(scopeButton, atom.P) >= 0 {
			return false // closes the p or not by quirks mode
		}
		s.insert(t, false)
	case atom.Option, atom.Optgroup:
		if s.top().atomOr() == atom.Option {
			s.pop(len(s.stack) - 1)
		}
		s.insert(t, false)
	default:
		s.insert(t, false)
	}
	return true
}

func (f *sframe) atomOr() atom.Atom {
	if f == nil {
		return 0
	}
	return f.atom
}

func (s *streamer) end(t tag) bool {
	switch s.mode() {
	case modeTable:
		switch t.atom {
		case atom.Table:
			s.pop(len(s.stack) - 1)
			return true
		case atom.Body, atom.Caption, atom.Col, atom.Colgroup, atom.Html, atom.Tbody, atom.Td, atom.Tfoot, atom.Th, atom.Thead, atom.Tr:
			return true
		}
		return false
	case modeTableBody:
		switch t.atom {
		case atom.Tbody, atom.Tfoot, atom.Thead:
			if s.top().atom == t.atom {
				s.pop(len(s.stack) - 1)
			}
			return true
		case atom.Table:
			s.pop(len(s.stack) - 1)
			return s.end(t)
		case atom.Body, atom.Caption, atom.Col, atom.Colgroup, atom.Html, atom.Td, atom.Th, atom.Tr:
			return true
		}
		return false
	case modeRow:
		switch t.atom {
		case atom.Tr:
			s.pop(len(s.stack) - 1)
			return true
		case atom.Table:
			s.pop(len(s.stack) - 1)
			return s.end(t)
		case atom.Tbody, atom.Tfoot, atom.Thead:
			if s.inScope(scopeTable, t.atom) >= 0 {
				s.pop(len(s.stack) - 1)
				return s.end(t)
			}
			return true
		case atom.Body, atom.Caption, atom.Col, atom.Colgroup, atom.Html, atom.Td, atom.Th:
			return true
		}
		return false
	case modeCell:
		switch t.atom {
		case atom.Td, atom.Th:
			if i := s.inScope(scopeTable, t.atom); i >= 0 {
				return s.popCell(i)
			}
			return true
		case atom.Body, atom.Caption, atom.Col, atom.Colgroup, atom.Html:
			return true
		case atom.Table, atom.Tbody, atom.Tfoot, atom.Thead, atom.Tr:
			if s.inScope(scopeTable, t.atom) >= 0 {
				return s.closeCell() && s.end(t)
			}
			return true
		}
	case modeColgroup:
		switch t.atom {
		case atom.Colgroup:
			s.pop(len(s.stack) - 1)
			return true
		case atom.Col:
			return true
		case atom.Template:
			return false
		}
		s.pop(len(s.stack) - 1)
		return s.end(t)
	}
	return s.endInBody(t)
}

func (s *streamer) endInBody(t tag) bool {
	switch t.atom {
	case atom.Body:
		if !s.boundaryOpen() {
			s.after = 1
		}
		return true
	case atom.Html:
		if !s.boundaryOpen() {
			s.after = 2
		}
		return true
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Button, atom.Center, atom.Details, atom.Dialog,
		atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Header, atom.Hgroup,
		atom.Listing, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.Pre, atom.Search, atom.Section, atom.Summary, atom.Ul:
		if i := s.inScope(scopeDefault, t.atom); i >= 0 {
			return s.popChecked(i)
		}
		return true
	case atom.Form:
		node := s.form
		s.form = 0
		i := s.inScope(scopeDefault, atom.Form)
		if node == 0 || i < 0 || s.stack[i].id != node {
			return true
		}
		s.impliedEnd()
		if s.top().id != node {
			return false // removed from under elements left open
		}
		s.pop(len(s.stack) - 1)
		return true
	case atom.P:
		i := s.inScope(scopeButton, atom.P)
		if i < 0 {
			return false // the parser makes an empty p
		}
		return s.popChecked(i)
	case atom.Li:
		if i := s.inScope(scopeListItem, atom.Li); i >= 0 {
			return s.popChecked(i)
		}
		return true
	case atom.Dd, atom.Dt:
		if i := s.inScope(scopeDefault, t.atom); i >= 0 {
			return s.popChecked(i)
		}
		return true
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if i := s.inScope(scopeDefault, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6); i >= 0 {
			return s.popChecked(i)
		}
		return true
	case atom.A, atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I, atom.Nobr, atom.S, atom.Small, atom.Strike, atom.Strong, atom.Tt, atom.U:
		// The adoption agency is a plain pop only when the element is the
		// current node; past a marker the parser treats it as any end tag.
		for i := len(s.stack) - 1; i >= 0 && !isMarker(s.stack[i].atom); i-- {
			if s.stack[i].atom == t.atom {
				if i != len(s.stack)-1 {
					return false
				}
				s.pop(i)
				return true
			}
		}
		return s.endOther(t)
	case atom.Applet, atom.Marquee, atom.Object:
		if i := s.inScope(scopeDefault, t.atom); i >= 0 {
			s.pop(i) // and the formatting elements after its marker leave the list
		}
		return true
	case atom.Br, atom.Template, atom.Select:
		return false
	}
	return s.endOther(t)
}

// boundaryOpen reports whether a scope boundary (a table, a cell, an
// object...) is open, which keeps the body element out of scope.
func (s *streamer) boundaryOpen() bool {
	for _, f := range s.stack {
		switch f.atom {
		case atom.Applet, atom.Caption, atom.Table, atom.Td, atom.Th, atom.Marquee, atom.Object, atom.Template, atom.Select:
			return true
		}
	}
	return false
}

// endOther is the parser's "any other end tag": close the nearest open
// element of that name unless a special element is above it.
func (s *streamer) endOther(t tag) bool {
	for i := len(s.stack) - 1; i >= 0; i-- {
		f := &s.stack[i]
		if f.atom == t.atom && (t.atom != 0 || f.name == t.name) {
			return s.popChecked(i)
		}
		if isSpecial(f.atom) {
			return true
		}
	}
	return true
}

func isFormatting(a atom.Atom) bool {
	switch a {
	case atom.A, atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I, atom.Nobr, atom.S, atom.Small, atom.Strike, atom.Strong, atom.Tt, atom.U:
		return true
	}
	return false
}

// isMarker reports the elements that put a marker in the list of active
// formatting elements.
func isMarker(a atom.Atom) bool {
	switch a {
	case atom.Applet, atom.Marquee, atom.Object, atom.Td, atom.Th, atom.Caption, atom.Template:
		return true
	}
	return false
}

// isSpecial reports x/net/html's special elements (HTML namespace).
func isSpecial(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Applet, atom.Area, atom.Article, atom.Aside, atom.Base, atom.Basefont, atom.Bgsound,
		atom.Blockquote, atom.Body, atom.Br, atom.Button, atom.Caption, atom.Center, atom.Col, atom.Colgroup,
		atom.Dd, atom.Details, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Embed, atom.Fieldset, atom.Figcaption,
		atom.Figure, atom.Footer, atom.Form, atom.Frame, atom.Frameset, atom.H1, atom.H2, atom.H3, atom.H4,
		atom.H5, atom.H6, atom.Head, atom.Header, atom.Hgroup, atom.Hr, atom.Html, atom.Iframe, atom.Img,
		atom.Input, atom.Keygen, atom.Li, atom.Link, atom.Listing, atom.Main, atom.Marquee, atom.Menu, atom.Meta,
		atom.Nav, atom.Noembed, atom.Noframes, atom.Noscript, atom.Object, atom.Ol, atom.P, atom.Param,
		atom.Plaintext, atom.Pre, atom.Script, atom.Section, atom.Select, atom.Source, atom.Style, atom.Summary,
		atom.Table, atom.Tbody, atom.Td, atom.Template, atom.Textarea, atom.Tfoot, atom.Th, atom.Thead,
		atom.Title, atom.Tr, atom.Track, atom.Ul, atom.Wbr, atom.Xmp:
		return true
	}
	return false
}
