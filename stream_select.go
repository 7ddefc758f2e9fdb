package magpie

import "strings"

// streamTag returns the tag name an OnHTML selector names when the selector
// can be answered from one start tag alone, as StreamHTML needs: a list of
// compound selectors, each a tag name followed by #id, .class and [attr]
// tests (a[href], img[src], link[rel=next], div.note, "a, img"). Anything
// else (combinators, pseudo-classes, "*", escapes, html/head/body, whose
// elements the parser may create or merge without a start tag of their own)
// returns ok false: such a selector needs the whole document.
//
// The grammar is deliberately narrower than CSS: whatever it accepts,
// cascadia matches by the element's own name and attributes, so matching an
// element detached from its document gives the same answer.
func streamTags(sel string) (tags []string, ok bool) {
	p := selScanner{s: sel}
	for {
		p.space()
		tag := p.ident()
		if tag == "" {
			return nil, false
		}
		tag = strings.ToLower(tag)
		switch tag {
		case "html", "head", "body":
			return nil, false
		}
		if !p.tests() {
			return nil, false
		}
		tags = append(tags, tag)
		p.space()
		if p.done() {
			return tags, true
		}
		if !p.eat(',') {
			return nil, false
		}
	}
}

type selScanner struct {
	s string
	i int
}

func (p *selScanner) done() bool { return p.i >= len(p.s) }

func (p *selScanner) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *selScanner) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r', '\f':
			p.i++
		default:
			return
		}
	}
}

// ident reads an ASCII CSS identifier; escapes and other characters end it.
func (p *selScanner) ident() string {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		ok := c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || p.i > start && '0' <= c && c <= '9'
		if !ok {
			break
		}
		p.i++
	}
	id := p.s[start:p.i]
	if id == "-" || len(id) > 1 && id[0] == '-' && (id[1] == '-' || '0' <= id[1] && id[1] <= '9') {
		return "" // not an identifier cascadia reads the same way
	}
	return id
}

// tests reads the #id, .class and [attr] tests after a tag name.
func (p *selScanner) tests() bool {
	for !p.done() {
		switch p.s[p.i] {
		case '#', '.':
			p.i++
			if p.ident() == "" {
				return false
			}
		case '[':
			p.i++
			if !p.attr() {
				return false
			}
		default:
			return true
		}
	}
	return true
}

// attr reads "name]" or "name op value]", value an identifier or a quoted
// string without escapes.
func (p *selScanner) attr() bool {
	p.space()
	if p.ident() == "" {
		return false
	}
	p.space()
	if p.eat(']') {
		return true
	}
	if p.i < len(p.s) && (p.s[p.i] == '~' || p.s[p.i] == '|' || p.s[p.i] == '^' || p.s[p.i] == '$' || p.s[p.i] == '*') {
		p.i++
	}
	if !p.eat('=') {
		return false
	}
	p.space()
	if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\'') {
		q := p.s[p.i]
		p.i++
		for p.i < len(p.s) && p.s[p.i] != q {
			if p.s[p.i] == '\\' || p.s[p.i] == '\n' {
				return false
			}
			p.i++
		}
		if !p.eat(q) {
			return false
		}
	} else if p.ident() == "" {
		return false
	}
	p.space()
	return p.eat(']')
}
