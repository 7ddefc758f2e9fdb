package urlkey

import (
	"net/url"
	"strings"
)

// ResolvePlain resolves the two kinds of href most links are, an absolute
// path ("/p/12?x=1") and an http(s) URL of plain characters
// ("http://example.com/p/12"), against an http(s) base in one pass into
// dst, its strings sliced from ref: no allocation of its own. It gives
// exactly what url.Parse and ResolveReference (and so Resolve) give, and
// declines (false, dst untouched) anything else, which Resolve then reads
// the long way.
func ResolvePlain(base *url.URL, ref string, dst *url.URL) bool {
	if base.Opaque != "" || base.Scheme != "http" && base.Scheme != "https" {
		return false
	}
	path, query, hasQuery := strings.Cut(ref, "?")
	if hasQuery && (query == "" || !plainQuery(query)) {
		return false // "?" alone is ForceQuery: the long way
	}
	switch {
	case strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "//"):
		if !plainPath(path) {
			return false
		}
		*dst = *base
		dst.Path, dst.RawPath, dst.OmitHost = path, "", false
		dst.RawQuery, dst.ForceQuery = query, false
		dst.Fragment, dst.RawFragment = "", ""
		return true
	case strings.HasPrefix(path, "http://"), strings.HasPrefix(path, "https://"):
		scheme, rest, _ := strings.Cut(path, "://")
		host, p := rest, ""
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			host, p = rest[:i], rest[i:]
		}
		if !plainHost(host) || p != "" && !plainPath(p) {
			return false
		}
		*dst = url.URL{Scheme: scheme, Host: host, Path: p, RawQuery: query}
		return true
	}
	return false
}

// resolvePlain is ResolvePlain into a new URL.
func resolvePlain(base *url.URL, ref string) (*url.URL, bool) {
	var u url.URL
	if !ResolvePlain(base, ref, &u) {
		return nil, false
	}
	return &u, true
}

// plainHost reports a non-empty host of lower-case letters, digits, "-" and
// "." with an optional port of digits, which url.Parse keeps as it is.
func plainHost(h string) bool {
	name, port, hasPort := strings.Cut(h, ":")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	if hasPort {
		for i := 0; i < len(port); i++ {
			if c := port[i]; c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// plainQuery reports a query of characters url.Parse keeps as they are and
// no fragment.
func plainQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-_.~!$&'()*+,;=:@/?", c) >= 0:
		default:
			return false
		}
	}
	return true
}
