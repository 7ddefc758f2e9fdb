package extensions

import (
	"net/url"

	"github.com/magpiecrawl/magpie"
)

// Referer sets the Referer header of each request found on a page to that
// page's URL (Request.ParentURL). The URL is kept on each request, not in
// the Context that siblings may share, so every sibling gets its own
// parent's URL whatever order the crawl runs them in. Requests that already
// carry a Referer, and those made by the Collector or a queue directly, are
// left alone. As browsers do, the Referer never carries the page's
// fragment or user:password.
func Referer(c *magpie.Collector) {
	c.OnRequest(func(r *magpie.Request) {
		if r.Headers.Get("Referer") != "" {
			return
		}
		if ref := referer(r.ParentURL()); ref != "" {
			r.Headers.Set("Referer", ref)
		}
	})
}

func referer(parent string) string {
	if parent == "" {
		return ""
	}
	u, err := url.Parse(parent)
	if err != nil {
		return ""
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	return u.String()
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
