package magpie

import (
	"net/url"
	"testing"
)

// Issue 39 point 3: the host a request is counted under for
// MaxRequestsPerHost is its host:port, lower-cased and without the
// scheme's default port, so that the ways a link may write one server are
// one budget, and other ports are servers of their own.
func TestBudgetKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.com/a":        "example.com",
		"http://example.com:80/a":     "example.com",
		"http://Example.COM:80/a":     "example.com",
		"https://example.com:443/":    "example.com",
		"https://example.com:80/":     "example.com:80",
		"http://example.com:443/":     "example.com:443",
		"http://127.0.0.1:8080/":      "127.0.0.1:8080",
		"http://[::1]:80/":            "[::1]",
		"file:///etc/passwd":          "",
		"http://example.com:8080/x?y": "example.com:8080",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := budgetKey(u); got != want {
			t.Errorf("budgetKey(%s) = %q, want %q", in, got, want)
		}
	}
}
