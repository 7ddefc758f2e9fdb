package magpie

import (
	"net/http"
	"net/url"
)

// Cookie limits, as browsers keep them (RFC 6265 §6.1 asks for at least 4096
// bytes per cookie and 50 cookies per domain; Chrome keeps 180): a host
// cannot make the crawler store thousands of cookies or send them all back.
const (
	// MaxCookieSize is the largest cookie kept: name and value, in bytes.
	MaxCookieSize = 4096
	// MaxCookiesPerHost is the most cookies kept for, and sent to, a URL.
	MaxCookiesPerHost = 180
	// MaxCookieHeader is the largest Cookie header sent, in bytes; cookies
	// that do not fit are left out.
	MaxCookieHeader = 8 << 10
)

// cappedJar applies the cookie limits to any jar the collector uses: the
// default one, a storage-backed one, or the user's.
type cappedJar struct{ http.CookieJar }

// capJar wraps j (nil stays nil: cookies disabled).
func capJar(j http.CookieJar) http.CookieJar {
	if j == nil {
		return nil
	}
	if _, ok := j.(*cappedJar); ok {
		return j
	}
	return &cappedJar{j}
}

// SetCookies stores what fits: oversized cookies are dropped, and new names
// only while the URL has fewer than MaxCookiesPerHost; updates and
// deletions of cookies it has always pass.
func (j *cappedJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	have := j.CookieJar.Cookies(u)
	names := make(map[string]bool, len(have))
	for _, c := range have {
		names[c.Name] = true
	}
	room := MaxCookiesPerHost - len(have)
	kept := cookies[:0:0]
	for _, c := range cookies {
		if len(c.Name)+len(c.Value) > MaxCookieSize {
			continue
		}
		if !names[c.Name] && c.MaxAge >= 0 {
			if room <= 0 {
				continue
			}
			room--
			names[c.Name] = true
		}
		kept = append(kept, c)
	}
	if len(kept) > 0 {
		j.CookieJar.SetCookies(u, kept)
	}
}

// Cookies returns the cookies for u, at most MaxCookiesPerHost and within
// MaxCookieHeader bytes as a Cookie header, in the jar's order (longest path
// first).
func (j *cappedJar) Cookies(u *url.URL) []*http.Cookie {
	all := j.CookieJar.Cookies(u)
	size := 0
	for i, c := range all {
		n := len(c.Name) + 1 + len(c.Value)
		if i > 0 {
			n += 2 // "; "
		}
		if i == MaxCookiesPerHost || size+n > MaxCookieHeader {
			return all[:i]
		}
		size += n
	}
	return all
}
