package magpie

import (
	"net/http"
	"net/url"
	"time"
)

// Response is the answer to a Request, as callbacks see it.
type Response struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Body is the decompressed body, converted to UTF-8 for text content.
	Body []byte
	// Ctx is the request's Context.
	Ctx *Context
	// Request is the request this responds to. It is set even for errors
	// found before any fetch (forbidden domain, robots.txt, depth, revisit),
	// so OnError always knows which request failed.
	Request *Request
	// Headers are the response headers.
	Headers *http.Header
	// Trace holds connection timings when TraceHTTP is on.
	Trace *HTTPTrace
	// Truncated is true when the body was cut at MaxBodySize (Colly truncates silently).
	Truncated bool
	// Redirects lists the URLs that redirected to the final one, in order;
	// empty when there was no redirect.
	Redirects []*url.URL
	// FromCache is true when the response came from CacheDir.
	FromCache bool

	// err is the failure the analyzer delivers to OnError.
	err error
	// aborted is set when OnRequest aborted the request: it finishes silently.
	aborted bool
	// retryAfter is the server's Retry-After, for the retry policy.
	retryAfter time.Duration
}
