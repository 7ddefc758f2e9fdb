// Package urlkey is magpie's URL handling below the Collector: links read as
// browsers read them (Parse, Resolve), the canonical form two URLs share when
// every server must treat them alike (Canonical), and the visited-set key of
// a request (RequestKey). It is a pure leaf: no I/O, no state, fuzzed in its
// tests.
package urlkey

import (
	"net/url"
	"slices"
	"strings"

	whatwg "github.com/nlnwa/whatwg-url/url"
)

// Canonical returns the form of u used for visited keys: scheme and host
// lowercased, default port dropped, fragment dropped, empty path as "/",
// percent-encoding normalised (unreserved characters decoded, hex uppercased);
// the query keeps its order unless sortQuery is set.
//
// Further rules, chosen so that two URLs share a key only when every server
// must treat them alike (RFC 3986 §6.2.2):
//   - dot segments ("/a/./b/../c") are resolved, after %2E is decoded;
//   - escapes of reserved characters stay escaped ("%2F" is not "/"), and a
//     stray "%" in the query ("%zz") is written "%25" as WHATWG reads it;
//   - an empty query ("http://h/?") is dropped;
//   - with sortQuery the "&"-separated pairs are stably sorted by key, so
//     repeated keys keep their relative order ("a=2&a=1" is not "a=1&a=2");
//   - userinfo is KEPT: credentials select what the server returns, and the
//     response cache must never serve one user's page for another's;
//   - IDN hosts are only lowercased (and percent-encoded as net/url writes
//     them), not converted to punycode, so "bücher.de" and
//     "xn--bcher-kva.de" are different keys;
//   - opaque URLs ("mailto:x@y") keep their opaque part as is.
//
// Canonical is idempotent: parsing its result and canonicalising again
// gives the same string. It never modifies u.
func Canonical(u *url.URL, sortQuery bool) string {
	scheme := strings.ToLower(u.Scheme)
	query := normalizeEscapes(u.RawQuery)
	if sortQuery && query != "" {
		query = sortQueryPairs(query)
	}
	if u.Opaque != "" {
		c := url.URL{Scheme: scheme, Opaque: u.Opaque, RawQuery: query}
		return c.String()
	}
	host := strings.ToLower(u.Host)
	// Only a "host:port" or "[v6]:port" form has a port to drop; garbage
	// such as "::" is left alone so that the result stays stable.
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") &&
		(strings.HasPrefix(host, "[") || !strings.Contains(host[:i], ":")) {
		switch port := host[i+1:]; {
		case port == "",
			port == "80" && (scheme == "http" || scheme == "ws"),
			port == "443" && (scheme == "https" || scheme == "wss"):
			host = host[:i]
		}
	}
	rawPath := removeDotSegments(normalizeEscapes(u.EscapedPath()))
	if rawPath == "" && (host != "" || scheme != "") {
		rawPath = "/"
	}
	if host == "" && u.User == nil && strings.HasPrefix(rawPath, "//") {
		// Without this, the path would be read back as an authority
		// (RFC 3986 §5.3 does the same).
		rawPath = "/." + rawPath
	}
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		// Unreachable: EscapedPath only returns valid escapes.
		path = rawPath
	}
	if path == "*" {
		rawPath = "*" // net/url writes the path "*" bare, whatever its escaping
	}
	c := url.URL{Scheme: scheme, User: u.User, Host: host, Path: path, RawPath: rawPath, RawQuery: query}
	return c.String()
}

// isUnreserved reports RFC 3986 unreserved characters, whose escapes are
// equivalent to the characters themselves.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// normalizeEscapes decodes escaped unreserved characters and uppercases the
// hex of the other escapes. A "%" that starts no valid escape (the query may
// hold them; Go rejects them in the path) becomes "%25". It allocates only on
// change.
func normalizeEscapes(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	const hexUpper = "0123456789ABCDEF"
	var b []byte
	for ; i < len(s); i++ {
		if s[i] != '%' {
			if b != nil {
				b = append(b, s[i])
			}
			continue
		}
		var hi, lo byte
		ok := i+2 < len(s)
		if ok {
			var ok1, ok2 bool
			hi, ok1 = unhex(s[i+1])
			lo, ok2 = unhex(s[i+2])
			ok = ok1 && ok2
		}
		if !ok {
			// A stray "%" means itself; escaping it stops it from
			// pairing with hex that a decoded neighbour brings.
			if b == nil {
				b = make([]byte, i, len(s)+2)
				copy(b, s[:i])
			}
			b = append(b, "%25"...)
			continue
		}
		v := hi<<4 | lo
		if isUnreserved(v) || s[i+1] != hexUpper[hi] || s[i+2] != hexUpper[lo] {
			if b == nil {
				b = make([]byte, i, len(s))
				copy(b, s[:i])
			}
		}
		if b != nil {
			if isUnreserved(v) {
				b = append(b, v)
			} else {
				b = append(b, '%', hexUpper[hi], hexUpper[lo])
			}
		}
		i += 2
	}
	if b == nil {
		return s
	}
	return string(b)
}

// removeDotSegments resolves "." and ".." segments of an absolute path as
// RFC 3986 §5.2.4 does; ".." never climbs above the root.
func removeDotSegments(p string) string {
	if !strings.HasPrefix(p, "/") || !strings.Contains(p, ".") {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "") // "/a/b/.." names the directory "/a/"
		}
	}
	return "/" + strings.Join(out, "/")
}

// sortQueryPairs stably sorts the "&"-separated pairs of q by key, dropping
// empty pairs.
func sortQueryPairs(q string) string {
	pairs := strings.Split(q, "&")
	pairs = slices.DeleteFunc(pairs, func(p string) bool { return p == "" })
	key := func(p string) string {
		k, _, _ := strings.Cut(p, "=")
		return k
	}
	slices.SortStableFunc(pairs, func(a, b string) int { return strings.Compare(key(a), key(b)) })
	return strings.Join(pairs, "&")
}

// RequestKey is the visited-set key for a request: a 64-bit hash of method,
// canonical URL and body.
//
// The hash is part of magpie's storage format: visited sets persist on disk
// and in Redis across processes and releases, so it must never change (which
// rules out hash/maphash, seeded per process). It is FNV-1a 64 over
// method, 0x00, canonical, 0x00, body, followed by the MurmurHash3 fmix64
// finaliser, a bijection that spreads FNV's weak low bits so that stores may
// shard on any bits of the key.
func RequestKey(method, canonical string, body []byte) uint64 {
	h := uint64(fnvOffset64)
	h = fnvString(h, method)
	h *= fnvPrime64 // the 0x00 separator: h ^ 0 == h
	h = fnvString(h, canonical)
	h *= fnvPrime64 // the 0x00 separator: h ^ 0 == h
	for _, c := range body {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	return fmix64(h)
}

// FNV-1a 64 parameters (the same as hash/fnv's New64a), written out so the
// hash needs no allocation.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime64
	}
	return h
}

// fmix64 is MurmurHash3's 64-bit finaliser.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb93e53ca7d85
	k ^= k >> 33
	return k
}

// hrefParser reads URLs as browsers do (the WHATWG URL standard): tabs and
// newlines are removed, leading and trailing spaces trimmed, "\" is "/" in
// http(s) URLs, a "%" not followed by two hex digits becomes "%25", and IDN
// hosts become punycode. net/url refuses or misreads all of these, and the
// pages that browsers reach through them would not be crawled.
var hrefParser = whatwg.NewParser(whatwg.WithPercentEncodeSinglePercentSign())

// plainRef reports whether s can be read by net/url exactly as a browser
// would read it: printable ASCII only, with no backslash. Most links are, and
// net/url is several times cheaper than the WHATWG parser.
func plainRef(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// Parse parses an absolute URL as a browser would.
func Parse(s string) (*url.URL, error) {
	if plainRef(s) {
		if u, err := url.Parse(s); err == nil {
			return u, nil
		}
	}
	w, err := hrefParser.Parse(s)
	if err != nil {
		return nil, err
	}
	return fromWHATWG(w)
}

// Resolve resolves the link ref against base as a browser would. The
// fragment is kept.
func Resolve(base *url.URL, ref string) (*url.URL, error) {
	if u, ok := resolvePlain(base, ref); ok {
		return u, nil
	}
	if plainRef(ref) {
		// net/url takes "//::0" as the host "::0", which it cannot write
		// back: colons in an unbracketed host go to the WHATWG parser.
		if r, err := url.Parse(ref); err == nil && (strings.Count(r.Host, ":") < 2 || strings.HasPrefix(r.Host, "[")) {
			return base.ResolveReference(r), nil
		}
	}
	w, err := hrefParser.ParseRef(base.String(), ref)
	if err != nil {
		return nil, err
	}
	return fromWHATWG(w)
}

// fromWHATWG converts a WHATWG URL to net/url's form. The standard leaves a
// lone "%" in a fragment as typed, which net/url refuses: it is written "%25".
func fromWHATWG(w *whatwg.Url) (*url.URL, error) {
	href := w.Href(false)
	if u, err := url.Parse(href); err == nil {
		return u, nil
	}
	return url.Parse(escapeLonePercent(href))
}

// escapeLonePercent writes each "%" not followed by two hex digits as "%25".
func escapeLonePercent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !hexDigit(s[i+1]) || !hexDigit(s[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hexDigit(c byte) bool {
	_, ok := unhex(c)
	return ok
}
