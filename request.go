package magpie

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/storage"
)

// Request is one HTTP request of a crawl, as callbacks see it. Fields may be
// changed in OnRequest; after that the request belongs to the engine.
//
// A Request is created by the Collector (Visit, Request.Visit, queue); the
// zero value is not useful.
type Request struct {
	// URL is the address to fetch; after redirects it is the final URL.
	URL *url.URL
	// Headers are sent with the request.
	Headers *http.Header
	// Host, when set, overrides the Host header.
	Host string
	// Ctx carries values between this request's callbacks and is copied into
	// the requests made from them.
	Ctx *Context
	// Depth is 1 for c.Visit and queue.AddURL, and the parent's Depth+1 for Request.Visit.
	Depth int
	// Method is the HTTP method.
	Method string
	// Body is the request body, or nil.
	Body io.Reader
	// ResponseCharacterEncoding, when set, forces the charset the response
	// body is decoded from, whatever the server declares.
	ResponseCharacterEncoding string
	// ID is unique among the requests of one Collector.
	ID uint32
	// ProxyURL is the proxy the request went through, set after the fetch.
	ProxyURL string
	// Priority orders the requests waiting in the frontier: higher first,
	// as Scrapy's Request.priority; requests of equal priority keep the
	// order they came in. It is 0 unless set: a request made with New and
	// sent with Do, or given to queue.AddRequest, may set its own; a link
	// made by Request.Visit (and its kin) starts at 0, not at its parent's.
	// When the request is admitted, the crawl order (BreadthFirst,
	// DepthFirst) and then the Prioritize hook decide its final value,
	// which callbacks then read; changing it later (in OnRequest, say) has
	// no effect on the order. It must fit in an int32: admission refuses a
	// request whose priority does not with an error wrapping
	// ErrPriorityRange. A retry keeps its request's priority.
	Priority int

	collector *Collector
	// abort is set by Abort from a callback.
	abort atomic.Bool
	// baseURL is the document's <base href>, used by AbsoluteURL.
	baseURL *url.URL
	// stdCtx cancels this request's fetch; nil means the collector's context.
	stdCtx context.Context
	// bodyBytes holds the body once read, so that a retry and the visited key can reuse it.
	bodyBytes []byte
	// parentURL is the URL of the page whose callbacks made this request.
	parentURL string

	// flight is the engine's bookkeeping of this request (flight.go):
	// run, tries, visited marks, host's turn, sitemap, callbacks, queue
	// entry. Its fields are promoted.
	flight
}

// New returns a request to u with the same Context as r (Colly shares it
// here; use Ctx.Clone for a copy), empty headers, depth r.Depth and a new ID.
// Send it with Do.
func (r *Request) New(method, u string, body io.Reader) (*Request, error) {
	n, err := r.collector.newRequest(u, method, r.Depth, body, r.Ctx, http.Header{})
	if err != nil {
		return nil, err
	}
	n.checkRevisit = true
	n.parentRun = r.run
	n.parentURL = urlString(r)
	return n, nil
}

// ParentURL returns the URL of the page this request was found on: the
// request whose Visit, Post or New made it (its final URL, after
// redirects). It is "" for requests made by the Collector or added to a
// queue directly. It is kept per request, so siblings never see each
// other's, and it travels through a queue's storage. Not in Colly.
func (r *Request) ParentURL() string { return r.parentURL }

// Abort cancels the request from a callback: in OnRequest silently, in
// OnRequestHeaders and OnResponseHeaders with an error delivered to OnError.
func (r *Request) Abort() { r.abort.Store(true) }

// IsAbort reports whether Abort was called.
func (r *Request) IsAbort() bool { return r.abort.Load() }

// AbsoluteURL resolves u against the document's <base href>, or else the
// request URL. It returns "" for a fragment-only u or one that does not parse.
func (r *Request) AbsoluteURL(u string) string {
	if abs := r.resolve(u); abs != nil {
		return abs.String()
	}
	return ""
}

// resolve is AbsoluteURL before the final String; nil stands for "". The
// href is read as browsers read it (see urlkey.Resolve) and keeps its fragment;
// visited keys drop it.
func (r *Request) resolve(u string) *url.URL {
	if isFragmentOnly(u) {
		return nil
	}
	base := r.baseURL
	if base == nil {
		base = r.URL
	}
	if base == nil {
		return nil
	}
	abs, err := urlkey.Resolve(base, u)
	if err != nil {
		return nil
	}
	return abs
}

// isFragmentOnly reports whether href names a place in the page itself
// ("#top"), after the spaces browsers ignore.
func isFragmentOnly(href string) bool {
	return strings.HasPrefix(strings.TrimLeft(href, " \t\n\r\f"), "#")
}

// Visit admits a GET of u (relative to this request) at depth r.Depth+1 with
// a copy of r.Ctx, so siblings never see each other's writes. It never waits
// for the crawl.
func (r *Request) Visit(u string) error {
	return r.child(http.MethodGet, u, nil, nil)
}

// HasVisited reports whether a GET of u (relative to this request) was admitted.
func (r *Request) HasVisited(u string) (bool, error) {
	return r.collector.HasVisited(r.AbsoluteURL(u))
}

// Post admits a form POST of data to u (relative to this request).
func (r *Request) Post(u string, data map[string]string) error {
	return r.child(http.MethodPost, u, formReader(data), nil)
}

// PostRaw admits a POST of data to u (relative to this request).
func (r *Request) PostRaw(u string, data []byte) error {
	return r.child(http.MethodPost, u, bytes.NewReader(data), nil)
}

// PostMultipart admits a multipart/form-data POST of parts to u.
func (r *Request) PostMultipart(u string, parts map[string][]byte) error {
	body, ct, err := multipartBody(parts)
	if err != nil {
		return err
	}
	h := r.collector.defaultHeaders()
	h.Set("Content-Type", ct)
	return r.child(http.MethodPost, u, bytes.NewReader(body), h)
}

func (r *Request) child(method, u string, body io.Reader, hdr http.Header) error {
	return r.childAt(method, u, r.Depth+1, false, body, hdr)
}

// childAt is child with the depth given, for a sitemap document (whose
// URLs, and nested sitemaps, are as deep as the sitemap itself).
func (r *Request) childAt(method, u string, depth int, sitemap bool, body io.Reader, hdr http.Header) error {
	c := r.collector
	var req *Request
	var err error
	// The resolved URL is used as is: printing it for AbsoluteURL and
	// parsing it again would double the cost of every link of a crawl.
	if isFragmentOnly(u) {
		// A link to a place in this page: the page itself, not a refusal.
		c.refusals.fragments.Add(1)
		return nil
	}
	var abs *url.URL
	if method == http.MethodGet && body == nil && hdr == nil && !sitemap {
		var done bool
		if abs, done, err = c.knownLink(r, u, depth); done {
			return err // already visited: refused without a Request
		}
	}
	if abs == nil {
		abs = r.resolve(u)
	}
	if abs != nil {
		abs.Fragment, abs.RawFragment = "", ""
		req, err = c.newRequestURL(abs, method, depth, body, r.Ctx.Clone(), hdr)
	} else {
		req, err = c.newRequest(u, method, depth, body, r.Ctx.Clone(), hdr) // let admission report the bad URL
	}
	if id := r.regionGID.Load(); id != 0 {
		// Made by r's callbacks (or by code holding r while they run): a
		// refusal's callbacks run nested, in their region.
		req.regionGID.Store(id)
		defer req.regionGID.Store(0)
	}
	if err != nil {
		req.err = err
		c.refuse(req, err)
		return err
	}
	req.checkRevisit = true
	req.sitemap = sitemap
	if sitemap {
		req.sitemapLevel = r.sitemapLevel + 1
		req.sitemapFor = r.sitemapFor
	}
	req.parentRun = r.run
	req.parentURL = urlString(r)
	req.pendingLink = true
	if r.run != nil && r.run.queueMode {
		req.entry.parent = r
		defer func() { req.entry.parent = nil }()
	}
	return c.submitChild(req)
}

// Retry submits the request again: same method, URL, body, depth and
// Context, without the visited check and without the Cookie header (the jar
// sets fresh ones). A body that cannot be rewound gives ErrRetryBodyUnseekable.
func (r *Request) Retry() error {
	n, err := r.retryCopy()
	if err != nil {
		return err
	}
	return r.collector.submit(n)
}

// retryCopy is the request Retry and the retry policy send again.
func (r *Request) retryCopy() (*Request, error) {
	body := r.bodyBytes
	if body == nil && r.Body != nil {
		s, ok := r.Body.(io.Seeker)
		if !ok {
			return nil, ErrRetryBodyUnseekable
		}
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return nil, ErrRetryBodyUnseekable
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		body = b
	}
	h := r.Headers.Clone()
	h.Del("Cookie")
	u := *r.URL
	n := &Request{
		URL:                       &u,
		Headers:                   &h,
		Host:                      r.Host,
		Ctx:                       r.Ctx,
		Depth:                     r.Depth,
		Method:                    r.Method,
		ResponseCharacterEncoding: r.ResponseCharacterEncoding,
		ID:                        r.ID,
		collector:                 r.collector,
		stdCtx:                    r.stdCtx,
		bodyBytes:                 body,
		parentURL:                 r.parentURL,
	}
	n.attempt = r.attempt + 1
	// A retry waits with the priority its request was admitted with.
	n.Priority, n.prioritized = r.Priority, true
	n.robotsWait = r.robotsWait
	n.flightSitemap = r.flightSitemap
	n.visitKey = r.visitKey
	n.root = r
	if r.root != nil {
		n.root = r.root
	}
	if body != nil {
		n.Body = bytes.NewReader(body)
	}
	return n, nil
}

// Do submits the request (made with New), with the visited check unless
// AllowURLRevisit is set.
func (r *Request) Do() error {
	return r.collector.submit(r)
}

// stdContext is the context the request's fetch and robots check run under.
func (r *Request) stdContext() context.Context {
	if r.stdCtx != nil {
		return r.stdCtx
	}
	return context.Background()
}

// serializableRequest is Marshal's JSON form. What is empty or implied is
// left out (the ID, a Method of GET, empty Ctx, Headers and Host); entries
// of earlier versions, which wrote every field, decode the same.
type serializableRequest struct {
	URL                       string
	Method                    string            `json:",omitempty"`
	Depth                     int               `json:",omitempty"`
	Body                      *[]byte           `json:",omitempty"` // nil: none; empty: an empty body
	ID                        uint32            `json:",omitempty"`
	Ctx                       map[string]string `json:",omitempty"`
	Headers                   http.Header       `json:",omitempty"`
	Host                      string            `json:",omitempty"`
	ResponseCharacterEncoding string            `json:",omitempty"`
	Attempt                   int               `json:",omitempty"`
	CheckRevisit              bool              `json:",omitempty"`
	Admitted                  bool              `json:",omitempty"`
	Marked                    bool              `json:",omitempty"`
	Parent                    string            `json:",omitempty"`
	Sitemap                   bool              `json:",omitempty"`
	SitemapLevel              int               `json:",omitempty"`
	SitemapFor                string            `json:",omitempty"`
	// Priority is Request.Priority; entries written before it existed
	// have none and decode at 0.
	Priority int `json:",omitempty"`
}

// Marshal encodes the request as JSON for a queue: URL, method, depth, body,
// Context (string values only; others are dropped), headers, host,
// priority and what the engine needs to resume it; empty fields and a GET
// method are left out, and so is the ID, which UnmarshalRequest assigns
// afresh (as Colly's does). The body stays readable afterwards.
func (r *Request) Marshal() ([]byte, error) {
	body := r.bodyBytes
	if body == nil && r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		body = b
		r.bodyBytes = b
		r.Body = bytes.NewReader(b)
	}
	var ctx map[string]string
	if r.Ctx != nil {
		r.Ctx.ForEach(func(k string, v any) any {
			if s, ok := v.(string); ok {
				if ctx == nil {
					ctx = make(map[string]string)
				}
				ctx[k] = s
			}
			return nil
		})
	}
	var h http.Header
	if r.Headers != nil {
		h = *r.Headers
	}
	u := ""
	if r.URL != nil {
		u = r.URL.String()
	}
	method := r.Method
	if method == http.MethodGet {
		method = "" // decoded as GET
	}
	var bp *[]byte
	if body != nil {
		bp = &body
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // a URL's & stays one byte
	err := enc.Encode(serializableRequest{
		URL: u, Method: method, Depth: r.Depth, Body: bp, Ctx: ctx,
		Headers: h, Host: r.Host, ResponseCharacterEncoding: r.ResponseCharacterEncoding,
		Attempt: r.attempt, CheckRevisit: r.checkRevisit, Admitted: r.entry.admitted,
		Marked: r.marked, Parent: r.parentURL, Sitemap: r.sitemap,
		SitemapLevel: r.sitemapLevel, SitemapFor: r.sitemapFor, Priority: r.Priority,
	})
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

func (c *Collector) unmarshalRequest(data []byte) (*Request, error) {
	var sr serializableRequest
	if err := json.Unmarshal(data, &sr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodableRequest, err)
	}
	u, err := url.Parse(sr.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodableRequest, err)
	}
	if err := storage.CheckPriority(sr.Priority); err != nil {
		return nil, fmt.Errorf("%w: Priority %d: %w", ErrUndecodableRequest, sr.Priority, err)
	}
	ctx := NewContext()
	for k, v := range sr.Ctx {
		ctx.Put(k, v)
	}
	h := sr.Headers
	if h == nil {
		h = http.Header{}
	}
	method := sr.Method
	if method == "" {
		method = http.MethodGet
	}
	r := &Request{
		URL: u, Method: method, Depth: sr.Depth, Headers: &h, Host: sr.Host, Ctx: ctx,
		ResponseCharacterEncoding: sr.ResponseCharacterEncoding,
		ID:                        c.nextID.Add(1), collector: c, stdCtx: c.Context,
		parentURL: sr.Parent, Priority: sr.Priority,
	}
	r.attempt = max(sr.Attempt, 1)
	r.checkRevisit = sr.CheckRevisit
	r.marked = sr.Admitted && sr.Marked
	r.flightSitemap = flightSitemap{sitemap: sr.Sitemap, sitemapLevel: sr.SitemapLevel, sitemapFor: sr.SitemapFor}
	r.entry.admitted = sr.Admitted
	if sr.Body != nil {
		r.bodyBytes = *sr.Body
		if r.bodyBytes == nil {
			r.bodyBytes = []byte{} // "Body":"" decodes to an empty body
		}
		r.Body = bytes.NewReader(r.bodyBytes)
	}
	return r, nil
}

// formReader encodes data as an application/x-www-form-urlencoded body, keys sorted.
func formReader(data map[string]string) io.Reader {
	v := url.Values{}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		v.Set(k, data[k])
	}
	return strings.NewReader(v.Encode())
}

// multipartBody encodes parts as multipart/form-data (CRLF line ends, as the
// RFC requires), parts in key order. It returns the body and its Content-Type.
func multipartBody(parts map[string][]byte) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, k := range slices.Sorted(maps.Keys(parts)) {
		fw, err := w.CreateFormField(k)
		if err != nil {
			return nil, "", err
		}
		if _, err := fw.Write(parts[k]); err != nil {
			return nil, "", err
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}
