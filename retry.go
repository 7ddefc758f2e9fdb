package magpie

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"time"
)

// maybeRetry sends a failed request back to the frontier when the retry
// policy allows, or when the server said "come back later" (see
// busyRetry), and reports whether it did. Nothing is retried once the run
// is stopped, nor a failure that is the end of the crawl's context (the
// StdlibContext cancelled or past its deadline): that is no timeout,
// although context.DeadlineExceeded is a net.Error whose Timeout is true.
func (r *run) maybeRetry(resp *Response) bool {
	if r.ctx.Err() != nil || endedByContext(resp.Request, resp.err) {
		return false
	}
	p := r.cfg.retry
	he, isHTTP := errors.AsType[*HTTPError](resp.err)
	if p != nil && (!isHTTP || slices.Contains(p.Statuses, he.StatusCode)) {
		return r.policyRetry(resp, p, he)
	}
	if isHTTP && serverBusy(resp, he.StatusCode) {
		return r.busyRetry(resp)
	}
	return false
}

// policyRetry is maybeRetry under a RetryPolicy that covers resp's error.
func (r *run) policyRetry(resp *Response, p *RetryOptions, he *HTTPError) bool {
	req := resp.Request
	if req.attempt >= p.MaxAttempts {
		return false
	}
	switch {
	case errors.Is(resp.err, ErrPrivateNetwork):
		return false // refused by DenyPrivateNetworks: it would be again
	case he != nil:
	case p.IgnoreNetworkErrors || !isNetworkError(resp.err):
		return false
	}
	delay := max(p.backoff(req.attempt, rand.Int64N), resp.retryAfter)
	if err := r.front.retry(r.ctx, req, time.Now().Add(delay)); err != nil {
		r.c.logger.Warn("cannot retry request", "url", req.URL.Redacted(), "method", req.Method, "request_id", req.ID, "err", err)
		return false
	}
	r.c.counts.retries.Add(1)
	r.c.logger.Warn("retrying request", "url", req.URL.Redacted(), "method", req.Method, "status", resp.StatusCode,
		"request_id", req.ID, "attempt", req.attempt, "duration", delay, "err", resp.err)
	r.settled()
	return true
}

// DefaultBusyRetries is how many times a request the server answered 429,
// or 503 with Retry-After, is sent again unless BusyRetries says otherwise.
const DefaultBusyRetries = 5

// serverBusy reports a response that asks the client to come back later: a
// 429 Too Many Requests, or a 503 Service Unavailable with Retry-After (a
// bare 503 may be an outage, which only a RetryPolicy retries).
func serverBusy(resp *Response, status int) bool {
	if status == http.StatusTooManyRequests {
		return true
	}
	return status == http.StatusServiceUnavailable && resp.Headers != nil && resp.Headers.Get("Retry-After") != ""
}

// busyRetry sends back a request the server asked to come back later,
// without a RetryPolicy (or with one that does not list the status): the
// request waits in the frontier for its Retry-After, and the host's hold
// (the limiter holds a host after every 429 or 503) keeps it, and the rest of
// the host's requests, from coming back sooner. At most BusyRetries times
// per request, each try counted as an attempt; then the last answer goes to
// OnError as a *RetryError.
func (r *run) busyRetry(resp *Response) bool {
	req := resp.Request
	bound := r.cfg.busyRetries
	switch {
	case bound == 0:
		bound = DefaultBusyRetries
	case bound < 0:
		bound = 0
	}
	if req.attempt > bound {
		return false
	}
	if err := r.front.retry(r.ctx, req, time.Now().Add(resp.retryAfter)); err != nil {
		r.c.logger.Warn("cannot retry request", "url", logURL(req), "method", req.Method, "request_id", req.ID, "err", err)
		return false
	}
	r.c.counts.busyRetries.Add(1)
	r.c.logger.Warn("server busy; retrying after the host's hold", "url", logURL(req), "method", req.Method,
		"status", resp.StatusCode, "request_id", req.ID, "attempt", req.attempt, "duration", resp.retryAfter)
	r.settled()
	return true
}

// waitRobots sends a request back to the frontier until its host's
// unreachable robots.txt is fetched again; the wait is not an attempt.
func (r *run) waitRobots(resp *Response, until time.Time) bool {
	req := resp.Request
	if r.ctx.Err() != nil {
		return false
	}
	req.attempt-- // the copy the frontier makes counts one more
	if err := r.front.retry(r.ctx, req, until); err != nil {
		req.attempt++
		r.c.logger.Warn("cannot hold request for robots.txt", "url", req.URL.Redacted(), "request_id", req.ID, "err", err)
		return false
	}
	r.settled()
	return true
}

// endedByContext reports whether err, req's failure, is the end of req's
// StdlibContext (cancelled, or past its deadline): the crawl is stopping,
// and a retry would only fail the same way.
func endedByContext(req *Request, err error) bool {
	cerr := req.stdContext().Err()
	return cerr != nil && errors.Is(err, cerr)
}

// isNetworkError reports transport failures worth a retry: timeouts,
// refused or reset connections, truncated responses. Refusals by magpie's
// own checks (a redirect to a forbidden domain, say) are not.
func isNetworkError(err error) bool {
	if isTimeout(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// retryableForget reports whether req, failed with err, should lose its
// visited mark so that a later Visit may try it again: transport failures
// and answers that say nothing of the page (saysNothing), but not a 404
// that would only fail again.
func retryableForget(req *Request, err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return saysNothing(req, he.StatusCode)
	}
	return isNetworkError(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// saysNothing reports whether an answer to req with status is the server's
// failure rather than news of the page: a server-side status (5xx, 408,
// 429), or a 304 Not Modified to a request that carried no validator,
// which answers a question that was not asked.
func saysNothing(req *Request, status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests ||
		status == http.StatusNotModified && !carriesValidator(req)
}

// carriesValidator reports whether req was sent with a validator that a
// 304 answers (If-None-Match or If-Modified-Since).
func carriesValidator(req *Request) bool {
	if req == nil || req.Headers == nil {
		return false
	}
	h := *req.Headers
	return h.Get("If-None-Match") != "" || h.Get("If-Modified-Since") != ""
}

// RetryOptions configure automatic retries (RetryPolicy). A retried request
// goes back to the frontier with a not-before time: it holds no worker while
// it waits and other hosts' work goes ahead. The final failure reaches
// OnError as a *RetryError carrying the attempt count.
type RetryOptions struct {
	// MaxAttempts is the most tries of one request, the first included (default 3).
	MaxAttempts int
	// BaseDelay is the wait before the first retry; it doubles each attempt (default 500 ms).
	BaseDelay time.Duration
	// MaxDelay caps the backoff, jitter included (default 30 s). A longer
	// Retry-After from the server is still honoured, up to the limiter's
	// MaxHold (limits.DefaultMaxHold, 10 minutes); a longer one is capped
	// there and logged at Warn.
	MaxDelay time.Duration
	// Statuses are the HTTP statuses retried (default 408, 425, 429, 500, 502, 503, 504).
	Statuses []int
	// IgnoreNetworkErrors stops retrying transport errors and timeouts,
	// which are retried by default.
	IgnoreNetworkErrors bool
}

func (p RetryOptions) withDefaults() RetryOptions {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 500 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.Statuses == nil {
		p.Statuses = []int{408, 425, 429, 500, 502, 503, 504}
	}
	return p
}

// backoff is the wait before try attempt+1: BaseDelay doubled per attempt,
// capped at MaxDelay, with "equal jitter" (half fixed, half random) so that
// failures of many requests do not retry in lockstep.
func (p *RetryOptions) backoff(attempt int, random func(int64) int64) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(random(int64(half)+1))
}
