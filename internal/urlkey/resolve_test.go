package urlkey

import (
	"net/url"
	"reflect"
	"testing"
)

var resolveBases = []string{"http://example.com/dir/page?q=1#f", "https://u:p@example.com:8443/a/", "http://127.0.0.1:38907/"}

var resolveRefs = []string{
	"/p/12", "/p/12?x=1&y=2", "/", "/a/./b", "/a/../b", "/a//b", "//h/p", "/p?", "/p?q#f", "/p#f", "/caf%C3%A9",
	"/a b", "/a?b c", "http://example.com", "http://example.com/p/1", "https://h:443/x?y", "http://h:/x",
	"http://H/x", "http://h:x/", "http://:80/", "http://h/./x", "http://user@h/", "HTTP://h/", "p/12", "?q",
	"http://h?q", "http://external.invalid/p/4874",
}

// TestResolvePlainAgrees: wherever resolvePlain answers, it answers what
// url.Parse and ResolveReference answer, field by field.
func TestResolvePlainAgrees(t *testing.T) {
	answered := 0
	for _, b := range resolveBases {
		base, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range resolveRefs {
			got, ok := resolvePlain(base, ref)
			if !ok {
				continue
			}
			answered++
			r, err := url.Parse(ref)
			if err != nil {
				t.Errorf("resolvePlain(%q, %q) = %q, but url.Parse fails: %v", b, ref, got, err)
				continue
			}
			if want := base.ResolveReference(r); !reflect.DeepEqual(got, want) {
				t.Errorf("resolvePlain(%q, %q) = %#v, want %#v", b, ref, got, want)
			}
		}
	}
	if answered < 20 {
		t.Errorf("resolvePlain answered %d cases, want the plain ones (at least 20)", answered)
	}
}

func FuzzResolvePlain(f *testing.F) {
	for _, b := range resolveBases {
		for _, r := range resolveRefs {
			f.Add(b, r)
		}
	}
	f.Fuzz(func(t *testing.T, b, ref string) {
		base, err := url.Parse(b)
		if err != nil || !base.IsAbs() {
			return
		}
		got, ok := resolvePlain(base, ref)
		if !ok {
			return
		}
		r, err := url.Parse(ref)
		if err != nil {
			t.Fatalf("resolvePlain(%q, %q) = %q, but url.Parse fails: %v", b, ref, got, err)
		}
		if want := base.ResolveReference(r); !reflect.DeepEqual(got, want) {
			t.Fatalf("resolvePlain(%q, %q) = %#v, want %#v", b, ref, got, want)
		}
	})
}
