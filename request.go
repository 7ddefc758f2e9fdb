package magpie

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
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

	collector *Collector
	// abort is set by Abort from a callback.
	abort atomic.Bool
	// baseURL is the document's <base href>, used by AbsoluteURL.
	baseURL *url.URL
	// stdCtx cancels this request's fetch; nil means the collector's context.
	stdCtx context.Context
	// attempt counts tries of this request, starting at 1.
	attempt int
	// bodyBytes holds the body once read, so that a retry and the visited key can reuse it.
	bodyBytes []byte
	// visitKey is the visited-set key; zero until admitted.
	visitKey uint64
	// checkRevisit is false for Retry and when AllowURLRevisit applies.
	checkRevisit bool
	// err is the request's final error, set before its completion is counted.
	err error
}
