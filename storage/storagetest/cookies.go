package storagetest

import (
	"errors"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// RunCookies runs the conformance suite for a storage.CookieStore. open must
// return a fresh, empty store on every call; the suite closes it when it is
// an io.Closer. Stores that also implement storage.Storage get Cookies and
// SetCookies checked against the CookieStore methods.
//
// Contract checked: cookies put for a URL come back for URLs of the same host
// (compared by name=value, so stores may keep or drop attributes), not for
// other hosts; several newline-joined cookies are stored; a cookie with the
// same name replaces the old value; after Close, methods return ErrClosed.
// Path scoping is not checked: per-host stores are allowed.
func RunCookies(t *testing.T, open func(t *testing.T) storage.CookieStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, c storage.CookieStore)
	}{
		{"RoundTrip", cookiesRoundTrip},
		{"PerHost", cookiesPerHost},
		{"Replace", cookiesReplace},
		{"CollyStorage", cookiesCollyStorage},
		{"Closed", cookiesClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := open(t)
			t.Cleanup(func() { closeStore(t, c) })
			tt.run(t, c)
		})
	}
}

func cookiesRoundTrip(t *testing.T, c storage.CookieStore) {
	u := mustURL(t, "http://example.com/")
	if got := mustGetCookies(t, c, u); len(got) != 0 {
		t.Errorf("GetCookies(%q) on an empty store = %q, want none", u, got)
	}
	mustPutCookies(t, c, u, "a=1")
	mustPutCookies(t, c, u, "b=2; Path=/\nc=3")
	for _, s := range []string{"http://example.com/", "http://example.com/x/y?z=1"} {
		if got := mustGetCookies(t, c, mustURL(t, s)); !slices.Equal(got, []string{"a=1", "b=2", "c=3"}) {
			t.Errorf("GetCookies(%q) = %q, want [a=1 b=2 c=3]", s, got)
		}
	}
}

func cookiesPerHost(t *testing.T, c storage.CookieStore) {
	mustPutCookies(t, c, mustURL(t, "http://example.com/"), "a=1")
	mustPutCookies(t, c, mustURL(t, "http://example.org/"), "b=2")
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"http://example.com/page", []string{"a=1"}},
		{"http://example.org/page", []string{"b=2"}},
		{"http://example.net/", nil},
	} {
		if got := mustGetCookies(t, c, mustURL(t, tc.url)); !slices.Equal(got, tc.want) {
			t.Errorf("GetCookies(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func cookiesReplace(t *testing.T, c storage.CookieStore) {
	u := mustURL(t, "http://example.com/")
	mustPutCookies(t, c, u, "a=1\nb=2")
	mustPutCookies(t, c, u, "a=9")
	if got := mustGetCookies(t, c, u); !slices.Equal(got, []string{"a=9", "b=2"}) {
		t.Errorf("GetCookies(%q) after replacing a = %q, want [a=9 b=2]", u, got)
	}
}

func cookiesCollyStorage(t *testing.T, c storage.CookieStore) {
	s, ok := c.(storage.Storage)
	if !ok {
		t.Skipf("%T does not implement storage.Storage", c)
	}
	u := mustURL(t, "http://example.com/")
	s.SetCookies(u, "a=1")
	mustPutCookies(t, c, u, "b=2")
	if got := splitCookies(s.Cookies(u)); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Errorf("Cookies(%q) = %q, want [a=1 b=2]", u, got)
	}
}

func cookiesClosed(t *testing.T, c storage.CookieStore) {
	cl, ok := c.(io.Closer)
	if !ok {
		t.Skipf("%T does not implement io.Closer", c)
	}
	u := mustURL(t, "http://example.com/")
	mustPutCookies(t, c, u, "a=1")
	if err := cl.Close(); err != nil {
		t.Fatalf("Close() error = %v, want nil", err)
	}
	if _, err := c.GetCookies(t.Context(), u); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("GetCookies() after Close error = %v, want %v", err, storage.ErrClosed)
	}
	if err := c.PutCookies(t.Context(), u, "b=2"); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("PutCookies() after Close error = %v, want %v", err, storage.ErrClosed)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q) error = %v", s, err)
	}
	return u
}

func mustPutCookies(t *testing.T, c storage.CookieStore, u *url.URL, cookies string) {
	t.Helper()
	if err := c.PutCookies(t.Context(), u, cookies); err != nil {
		t.Fatalf("PutCookies(%q, %q) error = %v, want nil", u, cookies, err)
	}
}

// mustGetCookies returns the sorted name=value pairs of the cookies for u.
func mustGetCookies(t *testing.T, c storage.CookieStore, u *url.URL) []string {
	t.Helper()
	s, err := c.GetCookies(t.Context(), u)
	if err != nil {
		t.Fatalf("GetCookies(%q) error = %v, want nil", u, err)
	}
	return splitCookies(s)
}

// splitCookies turns newline-joined Set-Cookie strings into sorted
// name=value pairs, dropping attributes.
func splitCookies(s string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		nv, _, _ := strings.Cut(line, ";")
		if nv = strings.TrimSpace(nv); nv != "" {
			out = append(out, nv)
		}
	}
	slices.Sort(out)
	return out
}
