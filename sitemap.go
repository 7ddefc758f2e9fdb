package magpie

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Limits of the sitemaps protocol (sitemaps.org): a sitemap lists at most
// 50,000 URLs and is at most 50 MB uncompressed. Past them the rest of the
// document is ignored and the sitemap is reported to OnError.
const (
	MaxSitemapURLs  = 50000
	MaxSitemapBytes = 50 << 20
)

// MaxSitemapNesting is how many sitemap indexes may stand above a sitemap.
// The protocol allows one (an index lists sitemaps, not indexes); one more
// level is followed, as some sites nest an index per section. The entries
// of an index nested deeper are refused with ErrSitemapNesting (OnRefused,
// Stats().Refused["sitemap_nesting"]), so an index whose every level names
// a new index ends.
const MaxSitemapNesting = 2

var (
	// ErrSitemapTooLarge is reported when a sitemap exceeds MaxSitemapURLs
	// URLs or MaxSitemapBytes bytes; the URLs before the limit are visited.
	ErrSitemapTooLarge = errors.New("sitemap exceeds the protocol's limits")
	// ErrSitemapInvalid is reported when a sitemap is neither a <urlset>
	// nor a <sitemapindex>, or its XML is broken.
	ErrSitemapInvalid = errors.New("invalid sitemap")
	// ErrSitemapNesting is returned for an entry of a sitemap index that has
	// MaxSitemapNesting indexes above it already; the entry is not fetched.
	ErrSitemapNesting = errors.New("sitemap index nested too deep")
	// ErrSitemapOutOfScope is returned (to OnRefused) for a sitemap entry on
	// another scheme or host than the sitemap itself, unless the sitemap was
	// named by that host's robots.txt (sitemaps.org cross-submission): a
	// sitemap on one host must not send the crawler to another.
	ErrSitemapOutOfScope = errors.New("sitemap lists a URL outside its scope")
)

// VisitSitemap fetches the sitemap (or sitemap index) at u, plain or
// gzip-compressed, and visits every page it lists, at depth 1 like Visit;
// nested sitemaps of an index are read too. Only URLs on the sitemap's own
// scheme and host are visited (those on another are refused with
// ErrSitemapOutOfScope), as the sitemaps protocol requires. Every URL goes through the usual
// admission (domains, filters, robots.txt, visited set), so refusals reach
// OnRefused. The sitemap documents themselves do not reach the callbacks;
// a sitemap that cannot be fetched or read reaches OnError. In sync mode it
// returns when the crawl is done, like Visit.
func (c *Collector) VisitSitemap(u string) error {
	req, err := c.newRequest(u, http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		req.err = err
		c.refuse(req, err)
		return err
	}
	req.checkRevisit = true
	req.sitemap = true
	if cfg := c.config(); cfg.recrawl != nil {
		c.recrawlVisit(cfg, req) // a start sitemap is read again, as a start URL is
	}
	return c.submit(req)
}

// SitemapsFromRobots makes the collector visit the sitemaps that a host's
// robots.txt names in Sitemap: lines, as VisitSitemap does, when it first
// reads that robots.txt during a crawl (robots.txt must be obeyed, which is
// the default).
func SitemapsFromRobots() CollectorOption {
	return func(c *Collector) { c.sitemapsFromRobots = true }
}

// SitemapModifiedSince skips sitemap URLs whose <lastmod> is before t; URLs
// without a <lastmod>, or with one that does not parse, are kept.
func SitemapModifiedSince(t time.Time) CollectorOption {
	return func(c *Collector) { c.sitemapSince = t }
}

// robotsSitemaps is the robots cache's hook for Sitemap: lines. It must not
// wait for the crawl: it runs inside an admission.
func (c *Collector) robotsSitemaps(robotsURL string, urls []string) {
	cfg := c.config()
	if !cfg.sitemapsFromRobots || cfg.ignoreRobots {
		return
	}
	for _, u := range urls {
		req, err := c.newRequest(u, http.MethodGet, 1, nil, nil, nil)
		if err == nil {
			req.checkRevisit = true
			req.sitemap = true
			// Found on robots.txt, not started by the user (see credentialScope).
			req.parentURL = robotsURL
			// A host's robots.txt may name a sitemap elsewhere for its URLs.
			if ru, perr := url.Parse(robotsURL); perr == nil {
				req.sitemapFor = originOf(ru)
			}
			_, err = c.enter(cfg, req)
		}
		if err != nil {
			c.refuseMarked(req, err)
		}
	}
}

// readSitemap visits what the sitemap in resp lists. Errors go to OnError
// and are returned.
func (c *Collector) readSitemap(cfg *config, resp *Response) error {
	err := c.walkSitemap(cfg, resp)
	if err != nil {
		c.handleOnError(resp, err)
	}
	return err
}

func (c *Collector) walkSitemap(cfg *config, resp *Response) error {
	req := resp.Request
	var body io.Reader = bytes.NewReader(resp.Body)
	if len(resp.Body) >= 2 && resp.Body[0] == 0x1f && resp.Body[1] == 0x8b {
		// A .xml.gz file: compressed content, not a Content-Encoding.
		zr, err := gzip.NewReader(body)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSitemapInvalid, req.URL.Redacted(), err)
		}
		defer zr.Close()
		body = zr
	}
	limited := &io.LimitedReader{R: body, N: MaxSitemapBytes + 1}
	dec := xml.NewDecoder(limited)
	dec.Strict = false
	var (
		root         string
		inEntry      bool
		field        string
		loc, lastmod strings.Builder
		urls         int
		tooLarge     bool
		parseErr     error
	)
	emit := func() {
		u := strings.TrimSpace(loc.String())
		if u == "" {
			return
		}
		if root == "urlset" {
			if urls++; urls > MaxSitemapURLs {
				tooLarge = true
				return
			}
			if !cfg.sitemapSince.IsZero() {
				if t, ok := parseW3CDate(strings.TrimSpace(lastmod.String())); ok && t.Before(cfg.sitemapSince) {
					return
				}
			}
			if cfg.recrawl != nil {
				t, _ := parseW3CDate(strings.TrimSpace(lastmod.String()))
				c.recrawlSitemapEntry(cfg, u, t)
			}
		}
		if c.refuseOutOfScope(req, u) {
			return
		}
		if root == "sitemapindex" && req.sitemapLevel >= MaxSitemapNesting {
			c.refuseNestedSitemap(req, u)
			return
		}
		// Refusals are reported by the child path; they do not fail the sitemap.
		_ = req.childAt(http.MethodGet, u, req.Depth, root == "sitemapindex", nil, nil)
	}
	for !tooLarge {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			if limited.N <= 0 {
				tooLarge = true
				break
			}
			parseErr = fmt.Errorf("%w: %s: %w", ErrSitemapInvalid, req.URL.Redacted(), err)
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			switch {
			case root == "":
				if name != "urlset" && name != "sitemapindex" {
					return fmt.Errorf("%w: %s: root element <%s>", ErrSitemapInvalid, req.URL.Redacted(), name)
				}
				root = name
			case (root == "urlset" && name == "url") || (root == "sitemapindex" && name == "sitemap"):
				inEntry = true
				loc.Reset()
				lastmod.Reset()
			case inEntry && (name == "loc" || name == "lastmod"):
				field = name
			}
		case xml.CharData:
			switch field {
			case "loc":
				loc.Write(t)
			case "lastmod":
				lastmod.Write(t)
			}
		case xml.EndElement:
			name := t.Name.Local
			switch {
			case name == field:
				field = ""
			case inEntry && (name == "url" || name == "sitemap"):
				inEntry = false
				emit()
			}
		}
		if limited.N <= 0 {
			tooLarge = true
		}
	}
	if resp.Truncated {
		// The URLs before the cut were visited; the rest is lost.
		return fmt.Errorf("%w: %s: cut at MaxBodySize (%d bytes)", ErrSitemapTooLarge, req.URL.Redacted(), cfg.maxBodySize)
	}
	if tooLarge {
		return fmt.Errorf("%w: %s: more than %d URLs or %d bytes", ErrSitemapTooLarge, req.URL.Redacted(), MaxSitemapURLs, MaxSitemapBytes)
	}
	if parseErr != nil {
		return parseErr
	}
	if root == "" {
		return fmt.Errorf("%w: %s: no <urlset> or <sitemapindex>", ErrSitemapInvalid, req.URL.Redacted())
	}
	return nil
}

// refuseOutOfScope refuses, through OnRefused, a sitemap entry loc whose
// scheme or host is neither the sitemap's own nor that of the robots.txt
// that named the sitemap, and reports whether it did.
func (c *Collector) refuseOutOfScope(sitemap *Request, loc string) bool {
	abs := sitemap.resolve(loc)
	if abs == nil || abs.Host == "" {
		return false // admission reports what is wrong with it
	}
	o := originOf(abs)
	if o == originOf(sitemap.URL) || (sitemap.sitemapFor != "" && o == sitemap.sitemapFor) {
		return false
	}
	abs.Fragment, abs.RawFragment = "", ""
	err := fmt.Errorf("%w: %s listed by %s", ErrSitemapOutOfScope, abs.Redacted(), sitemap.URL.Redacted())
	req, nerr := c.newRequestURL(abs, http.MethodGet, sitemap.Depth, nil, sitemap.Ctx.Clone(), nil)
	if nerr != nil {
		err = nerr
	}
	req.parentURL = urlString(sitemap)
	req.err = err
	c.refuse(req, err)
	return true
}

// originOf is u's scheme and host, with the scheme's default port written
// out and the host in its IDNA ASCII form, for comparing origins.
func originOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(asciiHost(u.Hostname()), port)
}

// parseW3CDate parses a sitemap <lastmod>: W3C Datetime, a profile of ISO
// 8601 (a date, or a date and time with a zone).
func parseW3CDate(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// refuseNestedSitemap refuses loc, an entry of the sitemap index req that
// already has MaxSitemapNesting indexes above it, without fetching it.
func (c *Collector) refuseNestedSitemap(req *Request, loc string) {
	var child *Request
	var err error
	if abs := req.resolve(loc); abs != nil {
		child, err = c.newRequestURL(abs, http.MethodGet, req.Depth, nil, req.Ctx.Clone(), nil)
	} else {
		child, err = c.newRequest(loc, http.MethodGet, req.Depth, nil, req.Ctx.Clone(), nil)
	}
	if err == nil {
		child.sitemap = true
		child.sitemapLevel = req.sitemapLevel + 1
		child.parentURL = urlString(req)
		err = fmt.Errorf("%w: %s is listed by %s, which has %d sitemap indexes above it", ErrSitemapNesting, loc, req.URL, req.sitemapLevel)
	}
	child.err = err
	c.refuse(child, err)
}
