package urlkey

import (
	"net/url"
	"strings"
)

// Key is RequestKey(method, Canonical(u, sortQuery), body), computed in one
// pass over u's parts when they are already in canonical form, as nearly
// every link of a crawl is (an http or https URL with a lower-case host, a
// path of plain characters without dot segments, a query without escapes):
// the canonical string is then only hashed, never built. Any other URL takes
// the long way, so the two always agree.
func Key(method string, u *url.URL, sortQuery bool, body []byte) uint64 {
	host, ok := plainParts(u, sortQuery)
	if !ok {
		return RequestKey(method, Canonical(u, sortQuery), body)
	}
	h := uint64(fnvOffset64)
	h = fnvString(h, method)
	h *= fnvPrime64 // the 0x00 separator
	h = fnvString(h, u.Scheme)
	h = fnvString(h, "://")
	h = fnvString(h, host)
	if u.Path == "" {
		h = fnvString(h, "/")
	} else {
		h = fnvString(h, u.Path)
	}
	if u.RawQuery != "" {
		h = fnvString(h, "?")
		h = fnvString(h, u.RawQuery)
	}
	h *= fnvPrime64 // the 0x00 separator
	for _, c := range body {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	return fmix64(h)
}

// plainParts reports whether Canonical(u, sortQuery) is exactly
// scheme "://" host path ["?" query], with the host returned without its
// default port, and the path "/" when empty. It accepts only what it can
// vouch for and leaves the rest to Canonical.
func plainParts(u *url.URL, sortQuery bool) (string, bool) {
	if u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" || u.User != nil ||
		u.RawPath != "" || u.ForceQuery {
		return "", false
	}
	host := u.Host
	if host == "" {
		return "", false
	}
	colon := -1
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.':
		case c == ':' && colon < 0:
			colon = i
		default:
			return "", false // upper case, IPv6, a second colon: the long way
		}
	}
	if colon >= 0 {
		switch port := host[colon+1:]; {
		case port == "",
			port == "80" && u.Scheme == "http",
			port == "443" && u.Scheme == "https":
			host = host[:colon]
		}
	}
	if host == "" {
		return "", false // "http://:80": Canonical's rules for no host
	}
	if p := u.Path; p != "" {
		if p[0] != '/' || !plainPath(p) {
			return "", false
		}
	}
	q := u.RawQuery
	if strings.IndexByte(q, '%') >= 0 || sortQuery && strings.IndexByte(q, '&') >= 0 {
		return "", false
	}
	return host, true
}

// plainPath reports whether p is written by net/url as it is (no character it
// escapes, no escape to normalise) and has no "." or ".." segment.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '~', c == '/', c == '$', c == '&', c == '+',
			c == ',', c == ':', c == ';', c == '=', c == '@':
		case c == '.':
			// A segment of "." or "..": the long way resolves it.
			start := i == 0 || p[i-1] == '/'
			j := i + 1
			if j < len(p) && p[j] == '.' {
				j++
			}
			if start && (j == len(p) || p[j] == '/') {
				return false
			}
		default:
			return false
		}
	}
	return true
}
