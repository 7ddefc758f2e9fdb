package magpie

import (
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/magpiecrawl/magpie/internal/urlkey"
)

// pendingTestLink builds a link as childAt does: resolved against base,
// fragment dropped, marked as a callback's link.
func pendingTestLink(t *testing.T, c *Collector, base *url.URL, href string) *Request {
	t.Helper()
	u, err := urlkey.Resolve(base, href)
	if err != nil {
		t.Fatalf("Resolve(%q) error = %v", href, err)
	}
	u.Fragment, u.RawFragment = "", ""
	ctx := NewContext()
	ctx.Put("k", href)
	req, err := c.newRequestURL(u, http.MethodGet, 3, nil, ctx, nil)
	if err != nil {
		t.Fatalf("newRequestURL(%q) error = %v", href, err)
	}
	req.checkRevisit = true
	req.marked = true
	req.visitKey = 42
	req.parentURL = base.String()
	req.robotsUA = "ua"
	req.pendingLink = true
	return req
}

// TestPendingCompactRoundTrip: a link that waits compact leaves the frontier
// as the Request it entered as (URL, depth, ID, Context, headers, marks).
func TestPendingCompactRoundTrip(t *testing.T) {
	c := NewCollector(Headers(map[string]string{"X-Test": "1"}))
	base, _ := url.Parse("http://example.com/dir/page?x=1")
	hrefs := []string{
		"/a", "b/c", "../up", "?q=a+b&r=%2F", "/p%2Fq/r", "/caf%C3%A9", "/café",
		"http://EXAMPLE.com:8080/x", "https://[::1]:8443/v6", "//other.example/x#frag",
		"/a;b=c", "/%7Euser", "/with space", "http://xn--bcher-kva.example/",
	}
	f := newMemFrontier(0)
	for _, href := range hrefs {
		t.Run(href, func(t *testing.T) {
			req := pendingTestLink(t, c, base, href)
			p := f.compact(req)
			if p.full != nil {
				t.Fatalf("compact(%q) kept the full request, want a compact entry", req.URL)
			}
			got := p.request()
			if got == req {
				t.Fatal("request() returned the original, want a new Request")
			}
			if !reflect.DeepEqual(got.URL, req.URL) {
				t.Errorf("URL = %#v, want %#v", got.URL, req.URL)
			}
			if got.URL.String() != req.URL.String() {
				t.Errorf("URL.String() = %q, want %q", got.URL.String(), req.URL.String())
			}
			if got.Depth != req.Depth || got.ID != req.ID || got.Ctx != req.Ctx || got.Method != http.MethodGet {
				t.Errorf("Depth, ID, Ctx, Method = %d %d %p %q, want %d %d %p GET",
					got.Depth, got.ID, got.Ctx, got.Method, req.Depth, req.ID, req.Ctx)
			}
			if got.visitKey != 42 || !got.checkRevisit || !got.marked || got.attempt != 1 {
				t.Errorf("visitKey, checkRevisit, marked, attempt = %d %v %v %d, want 42 true true 1",
					got.visitKey, got.checkRevisit, got.marked, got.attempt)
			}
			if got.parentURL != req.parentURL || got.robotsUA != "ua" || got.collector != c || got.stdCtx != req.stdCtx {
				t.Errorf("parentURL, robotsUA = %q %q, want %q ua (and the same collector and context)",
					got.parentURL, got.robotsUA, req.parentURL)
			}
			if !reflect.DeepEqual(*got.Headers, *req.Headers) {
				t.Errorf("Headers = %v, want %v", *got.Headers, *req.Headers)
			}
		})
	}
}

// TestPendingOriginShared: links of one page share one origin, and each
// gets headers of its own.
func TestPendingOriginShared(t *testing.T) {
	c := NewCollector(Headers(map[string]string{"X-Test": "1"}))
	base, _ := url.Parse("http://example.com/")
	f := newMemFrontier(0)
	a := f.compact(pendingTestLink(t, c, base, "/a"))
	b := f.compact(pendingTestLink(t, c, base, "/b"))
	if a.origin == nil || a.origin != b.origin {
		t.Fatalf("origins %p and %p, want one shared", a.origin, b.origin)
	}
	other, _ := url.Parse("http://example.com/other")
	if o := f.compact(pendingTestLink(t, c, other, "/c")); o.origin == a.origin {
		t.Error("a link of another page shares the first page's origin")
	}
	ra, rb := a.request(), b.request()
	ra.Headers.Set("X-Test", "changed")
	if got := rb.Headers.Get("X-Test"); got != "1" {
		t.Errorf("sibling's X-Test = %q after the other changed it, want 1", got)
	}
	if got := a.origin.headers.Get("X-Test"); got != "1" {
		t.Errorf("origin's X-Test = %q after a request changed its own, want 1", got)
	}
}

// TestPendingKeepsFull: what a compact entry cannot hold waits as itself.
func TestPendingKeepsFull(t *testing.T) {
	c := NewCollector()
	base, _ := url.Parse("http://example.com/")
	tests := []struct {
		name   string
		modify func(*Request)
	}{
		{"not a callback's link", func(r *Request) { r.pendingLink = false }},
		{"POST", func(r *Request) { r.Method = http.MethodPost }},
		{"retry", func(r *Request) { r.attempt = 2 }},
		{"body", func(r *Request) { r.bodyBytes = []byte("x") }},
		{"Host", func(r *Request) { r.Host = "other" }},
		{"sitemap", func(r *Request) { r.sitemap = true }},
		{"charset", func(r *Request) { r.ResponseCharacterEncoding = "latin1" }},
		{"robots wait", func(r *Request) { r.robotsWait = r.robotsWait.AddDate(1, 0, 0) }},
		{"redirect marks", func(r *Request) { r.redirectKeys = []uint64{1} }},
		{"user info", func(r *Request) { r.URL.User = url.User("u") }},
		{"upper-case scheme", func(r *Request) { r.URL.Scheme = "HTTP" }},
		{"relative path", func(r *Request) { r.URL.Path = "rel" }},
		{"queue entry", func(r *Request) { r.entry.deferMark = true }},
	}
	f := newMemFrontier(0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := pendingTestLink(t, c, base, "/a")
			tt.modify(req)
			if p := f.compact(req); p.full != req {
				t.Errorf("compact kept a compact entry, want the request itself")
			}
		})
	}
}
