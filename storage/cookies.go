package storage

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Cookie helpers for stores that keep cookies as text, in Storage's format:
// newline-joined Set-Cookie lines, kept per host name (the port does not
// scope cookies). A host's lines are merged by cookie name, new values
// first, as Colly's storage-backed jar does, and the helpers do the jar's
// remaining work: deleted and expired cookies are dropped, Max-Age becomes
// an absolute Expires when stored, and reading applies path and Secure
// scoping. The durable stores (sqlitestore, redisstore) share them.

// CookieHost is the key a store keeps the cookies for u under: the
// lowercased host name, without the port.
func CookieHost(u *url.URL) string { return strings.ToLower(u.Hostname()) }

// parseCookies parses Set-Cookie lines, skipping lines that do not parse:
// a bad cookie from a server must not lose the good ones.
func parseCookies(s string) []*http.Cookie {
	var out []*http.Cookie
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if c, err := http.ParseSetCookie(line); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func expired(c *http.Cookie, now time.Time) bool {
	return c.MaxAge < 0 || (!c.Expires.IsZero() && !c.Expires.After(now))
}

// MergeCookies merges incoming Set-Cookie lines into a host's stored lines
// and returns the lines to store; now dates Max-Age and drops expired cookies.
func MergeCookies(stored, incoming string, now time.Time) string {
	in := parseCookies(incoming)
	seen := make(map[string]bool, len(in))
	var keep []*http.Cookie
	for _, c := range in {
		if seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		if c.MaxAge > 0 {
			c.Expires = now.Add(time.Duration(c.MaxAge) * time.Second)
			c.MaxAge = 0
		}
		if !expired(c, now) {
			keep = append(keep, c)
		}
	}
	for _, c := range parseCookies(stored) {
		if !seen[c.Name] && !expired(c, now) {
			keep = append(keep, c)
		}
	}
	lines := make([]string, len(keep))
	for i, c := range keep {
		lines[i] = c.String()
	}
	return strings.Join(lines, "\n")
}

// SelectCookies returns the stored cookies to send to u, as Set-Cookie
// lines with their attributes (Path, HttpOnly, Expires…), as Colly's
// redisstorage returns them: unexpired, path-matching, and Secure ones only
// over https. A jar sends only their names and values.
func SelectCookies(stored string, u *url.URL, now time.Time) string {
	var b strings.Builder
	for _, c := range parseCookies(stored) {
		if expired(c, now) || (c.Secure && u.Scheme != "https") || !pathMatch(c.Path, u.Path) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// pathMatch is RFC 6265 section 5.1.4's path-match; a cookie without a
// Path attribute is sent on every path of its host.
func pathMatch(cookiePath, reqPath string) bool {
	if cookiePath == "" || cookiePath == "/" {
		return true
	}
	if reqPath == "" {
		reqPath = "/"
	}
	if !strings.HasPrefix(reqPath, cookiePath) {
		return false
	}
	return len(reqPath) == len(cookiePath) || strings.HasSuffix(cookiePath, "/") || reqPath[len(cookiePath)] == '/'
}
