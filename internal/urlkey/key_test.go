package urlkey

import (
	"net/url"
	"testing"
)

// keyCases mix URLs Key hashes in one pass with every kind it must hand to
// Canonical: the two must give the same key for all of them.
var keyCases = []string{
	"http://example.com",
	"http://example.com/",
	"http://example.com/a/b.html?x=1&y=2",
	"https://example.com:443/a",
	"http://example.com:80/a",
	"http://example.com:/a",
	"http://example.com:8080/a?q",
	"https://example.com:80/a",
	"http://127.0.0.1:38907/page/12",
	"HTTP://Example.COM/a",
	"http://example.com/a/./b/../c",
	"http://example.com/a/b/..",
	"http://example.com/..",
	"http://example.com/.well-known/x",
	"http://example.com/..x/x..",
	"http://example.com/a%2Fb",
	"http://example.com/%7Efoo",
	"http://example.com/a b",
	"http://example.com/a!b(c)*",
	"http://example.com/caf%c3%a9",
	"http://example.com/?q=%7e",
	"http://example.com/?b=2&a=1",
	"http://example.com/?",
	"http://user:pw@example.com/",
	"http://[::1]:80/a",
	"http://BÜCHER.de/",
	"mailto:someone@example.com",
	"ftp://example.com/a",
	"http://example.com/a#frag",
	"http://example.com//a//b/",
	"http://example.com/*",
}

func TestKeyAgreesWithCanonical(t *testing.T) {
	for _, s := range keyCases {
		for _, sortQuery := range []bool{false, true} {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatalf("url.Parse(%q) error = %v", s, err)
			}
			for _, method := range []string{"GET", "POST"} {
				want := RequestKey(method, Canonical(u, sortQuery), []byte("b"))
				if got := Key(method, u, sortQuery, []byte("b")); got != want {
					t.Errorf("Key(%s, %q, %v) = %x, want %x (canonical %q)", method, s, sortQuery, got, want, Canonical(u, sortQuery))
				}
			}
		}
	}
}

// TestKeyPlainAllocates nothing for the links a crawl meets most.
func TestKeyPlainAllocates(t *testing.T) {
	u, err := url.Parse("http://127.0.0.1:8080/page/12?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { Key("GET", u, true, nil) }); n != 0 {
		t.Errorf("Key of a plain URL: %v allocations, want 0", n)
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range keyCases {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, sortQuery bool) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		if got, want := Key("GET", u, sortQuery, nil), RequestKey("GET", Canonical(u, sortQuery), nil); got != want {
			t.Errorf("Key(%q, %v) = %x, want %x (canonical %q)", s, sortQuery, got, want, Canonical(u, sortQuery))
		}
	})
}
