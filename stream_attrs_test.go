package magpie

import (
	"bytes"
	"slices"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// tagAttrs reads the first start tag of src the tokenizer's way (TagAttr),
// and the streamer's plain way (plainAttrs), which must agree whenever it
// answers.
func tagAttrs(t *testing.T, src string) (want, got []html.Attribute, plain bool) {
	t.Helper()
	s := &streamer{}
	s.z = html.NewTokenizer(bytes.NewReader([]byte(src)))
	if tt := s.z.Next(); tt != html.StartTagToken && tt != html.SelfClosingTagToken {
		t.Fatalf("%q: first token %v, want a start tag", src, tt)
	}
	name := s.rawTagName(false)
	plain = s.plainAttrs(len(name))
	got = slices.Clone(s.attrBuf)
	for more := true; more; {
		k, v, m := s.z.TagAttr()
		more = m
		if k == nil {
			break
		}
		want = append(want, html.Attribute{Key: atom.String(k), Val: string(v)})
	}
	return want, got, plain
}

func TestStreamPlainAttrs(t *testing.T) {
	tests := []struct {
		src   string
		plain bool
	}{
		{`<a href="/p/1">`, true},
		{`<a href="/p/1" class="x y" data-id="7">`, true},
		{`<a>`, true},
		{`<br/>`, true},
		{`<img src="a.png" alt=""/>`, true},
		{`<a download href="/f">`, true},
		{"<a\thref=\"/x\"\n\fid=\"i\">", true},
		{`<a HREF="/x">`, false},
		{`<a href=/x>`, false},
		{`<a href='/x'>`, false},
		{`<a href="/x?a=1&amp;b=2">`, false},
		{"<a href=\"/x\r\ny\">", false},
		{`<a href="/x"class="c">`, false},
		{`<a href="/x" href="/y">`, false},
		{`<a href = "/x">`, false},
		{`<a href="/x" / >`, false},
		{`<a ="x">`, false},
		{`<a href="a>b">`, true},
	}
	for _, tt := range tests {
		want, got, plain := tagAttrs(t, tt.src)
		if plain != tt.plain {
			t.Errorf("plainAttrs(%q) = %v, want %v", tt.src, plain, tt.plain)
		}
		if plain && !slices.Equal(got, want) {
			t.Errorf("plainAttrs(%q) read %q, the tokenizer %q", tt.src, got, want)
		}
	}
}

func FuzzStreamPlainAttrs(f *testing.F) {
	for _, s := range []string{`<a href="/p/1">`, `<a b c="d" e>`, `<x-y z:w="1"/>`, `<a href="a>b">`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if bytes.IndexByte([]byte(src), 0) >= 0 {
			return // streamHTML never streams a page with NUL
		}
		s := &streamer{}
		s.z = html.NewTokenizer(bytes.NewReader([]byte(src)))
		if tt := s.z.Next(); tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			return
		}
		want, got, plain := tagAttrs(t, src)
		if plain && !slices.Equal(got, want) {
			t.Fatalf("plainAttrs(%q) read %q, the tokenizer %q", src, got, want)
		}
	})
}
