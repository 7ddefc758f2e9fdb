package magpie

import (
	"hash/fnv"
	"net/url"
)

// canonicalURL returns the form of u used for visited keys: scheme and host
// lowercased, default port dropped, fragment dropped, empty path as "/",
// percent-encoding normalised (unreserved characters decoded, hex uppercased);
// the query keeps its order unless sortQuery is set.
func canonicalURL(u *url.URL, sortQuery bool) string {
	c := *u // STUB: replaced by the full canonicaliser
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// requestKey is the visited-set key for a request: a 64-bit hash of method,
// canonical URL and body.
func requestKey(method, canonical string, body []byte) uint64 {
	h := fnv.New64a() // STUB
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(canonical))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum64()
}
