package urlkey

import (
	"hash/fnv"
	"net/url"
	"testing"
)

func TestCanonicalURL(t *testing.T) {
	tests := []struct {
		in        string
		sortQuery bool
		want      string
	}{
		{"HTTP://Example.COM", false, "http://example.com/"},
		{"http://example.com:80/a", false, "http://example.com/a"},
		{"https://example.com:443/a", false, "https://example.com/a"},
		{"http://example.com:443/a", false, "http://example.com:443/a"},
		{"https://example.com:80/a", false, "https://example.com:80/a"},
		{"http://example.com:/a", false, "http://example.com/a"},
		{"http://example.com:8080/a", false, "http://example.com:8080/a"},
		{"http://[::1]:80/a", false, "http://[::1]/a"},
		{"http://[::1]/a", false, "http://[::1]/a"},
		{"http://[::1]:8080/a", false, "http://[::1]:8080/a"},
		{"http://example.com/a#frag", false, "http://example.com/a"},
		{"http://example.com/a?#frag", false, "http://example.com/a"},
		{"http://example.com/?", false, "http://example.com/"},
		{"http://example.com/%7Efoo/%41%62c", false, "http://example.com/~foo/Abc"},
		{"http://example.com/a%2fb%3a", false, "http://example.com/a%2Fb%3A"},
		{"http://example.com/a%2Fb", false, "http://example.com/a%2Fb"},
		{"http://example.com/caf%c3%a9", false, "http://example.com/caf%C3%A9"},
		{"http://example.com/a b", false, "http://example.com/a%20b"},
		{"http://example.com/Case/Path", false, "http://example.com/Case/Path"},
		{"http://example.com/a/./b/../c", false, "http://example.com/a/c"},
		{"http://example.com/a/b/..", false, "http://example.com/a/"},
		{"http://example.com/a/b/.", false, "http://example.com/a/b/"},
		{"http://example.com/../../a", false, "http://example.com/a"},
		{"http://example.com/a/%2E%2E/b", false, "http://example.com/b"},
		{"http://example.com/a//b", false, "http://example.com/a//b"},
		{"http://example.com/.well-known/x", false, "http://example.com/.well-known/x"},
		{"http://example.com/?b=2&a=1&a=0", false, "http://example.com/?b=2&a=1&a=0"},
		{"http://example.com/?b=2&a=1&a=0", true, "http://example.com/?a=1&a=0&b=2"},
		{"http://example.com/?b=2&&a=1", true, "http://example.com/?a=1&b=2"},
		{"http://example.com/?q=%7e%2f%zz+x", false, "http://example.com/?q=~%2F%25zz+x"},
		{"http://example.com/?q=a%2", false, "http://example.com/?q=a%252"},
		{"http://example.com/?q=%%610", false, "http://example.com/?q=%25a0"},
		{"http://User:Pa%73s@Example.com/", false, "http://User:Pass@example.com/"},
		{"http://BÜCHER.de/", false, "http://b%C3%BCcher.de/"},
		{"mailto:Someone@Example.com", false, "mailto:Someone@Example.com"},
		{"FILE:///etc/passwd", false, "file:///etc/passwd"},
		{"/relative/../path?x=1", false, "/path?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			u, err := url.Parse(tt.in)
			if err != nil {
				t.Fatalf("url.Parse(%q) error = %v", tt.in, err)
			}
			before := u.String()
			got := Canonical(u, tt.sortQuery)
			if got != tt.want {
				t.Errorf("Canonical(%q, %v) = %q, want %q", tt.in, tt.sortQuery, got, tt.want)
			}
			if u.String() != before {
				t.Errorf("Canonical(%q) modified its argument to %q", tt.in, u.String())
			}
		})
	}
}

func TestCanonicalURLEquivalence(t *testing.T) {
	groups := [][]string{
		{"http://h/x", "HTTP://H:80/x#a", "http://h/x#b", "http://h/./x", "http://h/%78"},
		{"http://h", "http://h/", "http://H:80"},
	}
	for _, g := range groups {
		want := mustCanonical(t, g[0], false)
		for _, s := range g[1:] {
			if got := mustCanonical(t, s, false); got != want {
				t.Errorf("Canonical(%q) = %q, want %q (same as %q)", s, got, want, g[0])
			}
		}
	}
}

func mustCanonical(t testing.TB, s string, sortQuery bool) string {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q) error = %v", s, err)
	}
	return Canonical(u, sortQuery)
}

func TestCanonicalRequestKey(t *testing.T) {
	// Golden values: the key is persisted by stores, so it must never change.
	if got, want := RequestKey("GET", "http://example.com/", nil), uint64(0x4e65818b63857779); got != want {
		t.Errorf("RequestKey(GET, http://example.com/) = %#x, want %#x (the key format changed!)", got, want)
	}
	// It equals fmix64 of hash/fnv's FNV-1a 64 over the documented layout.
	h := fnv.New64a()
	h.Write([]byte("POST\x00http://example.com/form\x00a=1"))
	if got, want := RequestKey("POST", "http://example.com/form", []byte("a=1")), fmix64(h.Sum64()); got != want {
		t.Errorf("RequestKey(POST ...) = %#x, want %#x", got, want)
	}
	distinct := map[uint64]string{}
	for _, c := range []struct {
		method, url, body string
	}{
		{"GET", "http://h/", ""},
		{"HEAD", "http://h/", ""},
		{"GET", "http://h/a", ""},
		{"POST", "http://h/", ""},
		{"POST", "http://h/", "a=1"},
		{"POST", "http://h/", "a=2"},
		{"GE", "Thttp://h/", ""},
	} {
		k := RequestKey(c.method, c.url, []byte(c.body))
		if prev, dup := distinct[k]; dup {
			t.Errorf("RequestKey(%q, %q, %q) collides with %s", c.method, c.url, c.body, prev)
		}
		distinct[k] = c.method + " " + c.url + " " + c.body
	}
}

func FuzzCanonicalURL(f *testing.F) {
	for _, s := range []string{
		"http://example.com", "HTTPS://A.b:443/%7e/./../x?b=1&a=2#f", "http://[::1]:80/",
		"http://u:p@h/a%2fb?q=%zz", "mailto:x@y", "/rel/../x", "http://h/a/b/..", "file:///x",
		"http://h/%2e%2E/a", "http://h:/?&&", "http://h/?a=1;b=2&a",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, sortQuery bool) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		c1 := Canonical(u, sortQuery)
		u2, err := url.Parse(c1)
		if err != nil {
			t.Fatalf("Canonical(%q) = %q, which does not parse: %v", s, c1, err)
		}
		if c2 := Canonical(u2, sortQuery); c2 != c1 {
			t.Fatalf("Canonical not idempotent for %q:\n first %q\nsecond %q", s, c1, c2)
		}
	})
}

func BenchmarkCanonicalURL(b *testing.B) {
	for _, bc := range []struct{ name, url string }{
		{"clean", "https://example.com/products/widgets?page=2&sort=price"},
		{"messy", "HTTPS://Example.COM:443/a/./b/../%7Ec%2f?z=1&a=%3a#frag"},
	} {
		u, err := url.Parse(bc.url)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Canonical(u, true)
			}
		})
	}
	b.Run("RequestKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			RequestKey("GET", "https://example.com/products/widgets?page=2&sort=price", nil)
		}
	})
}

// FuzzResolveRef: any href, read as a browser would, either fails or gives an
// absolute URL that net/url reads back and that canonicalises.
func FuzzResolveRef(f *testing.F) {
	for _, s := range []string{
		"other", "/root", "#frag", "%zz", "a\tb\nc", "  spaced  ", `..\up\file`, "x.html#%_sec_6.2",
		"http://BÜCHER.example/", "http://[::1", "//h2/p?q", "javascript:void(0)", "?q=%", "http://h:99999/", "//::0", "http://a::b/",
	} {
		f.Add(s)
	}
	base, _ := url.Parse("http://h/dir/page?q=1")
	f.Fuzz(func(t *testing.T, href string) {
		u, err := Resolve(base, href)
		if err != nil {
			return
		}
		if u.Scheme == "" {
			t.Fatalf("Resolve(%q) = %q, not absolute", href, u)
		}
		if _, err := url.Parse(u.String()); err != nil {
			t.Fatalf("Resolve(%q) = %q, which does not parse: %v", href, u, err)
		}
		_ = Canonical(u, true)
	})
}
