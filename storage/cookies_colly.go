package storage

import (
	"net/http"
	"strings"
)

// StringifyCookies writes cookies in Storage's cookie format, as Colly's
// helper of that name does: one Set-Cookie line each, joined by "\n".
func StringifyCookies(cookies []*http.Cookie) string {
	lines := make([]string, 0, len(cookies))
	for _, c := range cookies {
		if s := c.String(); s != "" {
			lines = append(lines, s)
		}
	}
	return strings.Join(lines, "\n")
}

// UnstringifyCookies parses Storage's cookie format (StringifyCookies'
// output) back into cookies. Lines that do not parse are skipped.
func UnstringifyCookies(s string) []*http.Cookie {
	return parseCookies(s)
}

// ContainsCookie reports whether cookies holds one named name.
func ContainsCookie(cookies []*http.Cookie, name string) bool {
	for _, c := range cookies {
		if c.Name == name {
			return true
		}
	}
	return false
}
