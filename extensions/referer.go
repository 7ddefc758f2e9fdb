package extensions

import (
	"net/url"
	"strings"

	"github.com/magpiecrawl/magpie"
)

// Referer sets the Referer header of each request found on a page from
// that page's URL (Request.ParentURL), under the policy browsers apply by
// default, strict-origin-when-cross-origin (RFC 9110 section 10.1.3, W3C
// Referrer Policy): the full URL for a request to the page's own origin,
// only the origin ("https://host/") for another origin, and no Referer at
// all from an https page to an http URL, which would expose it in clear.
// The URL never carries the page's fragment or user:password. It is kept on
// each request, not in the Context that siblings may share, so every
// sibling gets its own parent's URL whatever order the crawl runs them in.
// Requests that already carry a Referer, and those made by the Collector or
// a queue directly, are left alone.
func Referer(c *magpie.Collector) {
	c.OnRequest(func(r *magpie.Request) {
		if r.Headers.Get("Referer") != "" {
			return
		}
		if ref := referer(r.ParentURL(), r.URL); ref != "" {
			r.Headers.Set("Referer", ref)
		}
	})
}

// referer is the Referer a request to target gets from the page at parent.
func referer(parent string, target *url.URL) string {
	if parent == "" || target == nil {
		return ""
	}
	u, err := url.Parse(parent)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	if u.Scheme == "https" && target.Scheme != "https" {
		return "" // a downgrade
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	if !sameOrigin(u, target) {
		return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"}).String()
	}
	return u.String()
}

// sameOrigin compares scheme, host and port, with the scheme's default port
// for one not given.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// URLLengthFilter aborts, silently as Colly does, requests whose URL is
// longer than limit bytes; such URLs are usually calendar or session traps.
func URLLengthFilter(c *magpie.Collector, limit int) {
	c.OnRequest(func(r *magpie.Request) {
		if len(r.URL.String()) > limit {
			r.Abort()
		}
	})
}
