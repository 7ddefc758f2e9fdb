package main

import (
	"net/url"
	"testing"
)

// The scope by --scope value, after a start URL landed on another host:
// ports and case do not matter; subdomains and domain widen it; wider names
// the value that would let a URL in.
func TestScope(t *testing.T) {
	for _, tc := range []struct {
		mode, start, landed string
		url                 string
		allows              bool
		wider               string
	}{
		{"host", "https://example.com/", "", "https://EXAMPLE.com:8443/a", true, ""},
		{"host", "https://example.com/", "", "https://www.example.com/", false, "subdomains"},
		{"host", "https://example.com/", "https://www.example.com/", "http://www.example.com/a", true, ""},
		{"host", "https://www.example.com/", "", "https://blog.example.com/", false, "domain"},
		{"host", "https://www.example.com/", "", "https://example.org/", false, ""},
		{"host", "https://example.com/", "", "mailto:a@example.org", true, ""}, // the collector refuses it by scheme
		{"subdomains", "https://docs.example.co.uk/", "", "https://a.docs.example.co.uk/", true, ""},
		{"subdomains", "https://docs.example.co.uk/", "", "https://example.co.uk/", false, "domain"},
		{"domain", "https://docs.example.co.uk/", "", "https://shop.example.co.uk/", true, ""},
		{"domain", "https://docs.example.co.uk/", "", "https://other.co.uk/", false, ""},
		{"host", "https://bücher.example/", "", "https://xn--bcher-kva.example/x", true, ""},
	} {
		s := newScope(tc.mode, []*url.URL{mustURL(t, tc.start)})
		if tc.landed != "" {
			s.add(mustURL(t, tc.landed))
		}
		u := mustURL(t, tc.url)
		if got := s.allows(u); got != tc.allows {
			t.Errorf("--scope %s from %s (landed %q): allows(%s) = %v, want %v", tc.mode, tc.start, tc.landed, tc.url, got, tc.allows)
		}
		if !tc.allows {
			if got := s.wider(u); got != tc.wider {
				t.Errorf("--scope %s from %s: wider(%s) = %q, want %q", tc.mode, tc.start, tc.url, got, tc.wider)
			}
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// --no-parent: on a start URL's host, only its directory and below, as
// wget's; other hosts the scope lets in are not restricted; where a start
// URL landed adds its directory.
func TestScopeNoParent(t *testing.T) {
	for _, tc := range []struct {
		mode, start, landed string
		url                 string
		allows              bool
	}{
		{"host", "https://example.com/docs/", "", "https://example.com/docs/", true},
		{"host", "https://example.com/docs/", "", "https://EXAMPLE.com:8443/docs/a/b.html?x=1", true},
		{"host", "https://example.com/docs/", "", "https://example.com/docs", false},
		{"host", "https://example.com/docs/", "", "https://example.com/", false},
		{"host", "https://example.com/docs/", "", "https://example.com/docsx/a.html", false},
		{"host", "https://example.com/docs/a.html", "", "https://example.com/docs/b.html", true},
		{"host", "https://example.com/docs/a.html", "", "https://example.com/other/", false},
		{"host", "https://example.com/docs", "", "https://example.com/other/", true}, // its directory is /
		{"host", "https://example.com/docs/", "https://example.com/v2/docs/", "https://example.com/v2/docs/x", true},
		{"host", "https://example.com/docs/", "https://example.com/v2/docs/", "https://example.com/v2/", false},
		{"subdomains", "https://example.com/docs/", "", "https://blog.example.com/2020/post", true},
		{"subdomains", "https://example.com/docs/", "", "https://example.com/blog/", false},
	} {
		s := newScope(tc.mode, []*url.URL{mustURL(t, tc.start)})
		s.keepBelow([]*url.URL{mustURL(t, tc.start)})
		if tc.landed != "" {
			s.add(mustURL(t, tc.landed))
			s.land(mustURL(t, tc.landed))
		}
		if got := s.allows(mustURL(t, tc.url)); got != tc.allows {
			t.Errorf("--scope %s --no-parent from %s (landed %q): allows(%s) = %v, want %v", tc.mode, tc.start, tc.landed, tc.url, got, tc.allows)
		}
	}
}
