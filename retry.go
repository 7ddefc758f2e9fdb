package magpie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	policy := p != nil && (!isHTTP || slices.Contains(p.Statuses, he.StatusCode))
	busy := !policy && isHTTP && serverBusy(resp, he.StatusCode)
	if (policy || busy) && r.cfg.tooLongRetryAfter(resp.retryAfter) && r.cfg.triesLeft(resp.Request, policy) {
		// The request fails now, as MaxRetryAfter asks, rather than wait.
		resp.err = fmt.Errorf("%w (%v, over the bound of %v): %w",
			ErrRetryAfterTooLong, resp.retryAfter, r.cfg.maxRetryAfter, resp.err)
		return false
	}
	switch {
	case policy:
		return r.policyRetry(resp, p, he)
	case busy:
		return r.busyRetry(resp)
	}
	return false
}

// triesLeft reports whether req may be tried again: under the RetryPolicy
// (policy), or under BusyRetries.
func (cfg *config) triesLeft(req *Request, policy bool) bool {
	if policy {
		return req.attempt < cfg.retry.MaxAttempts
	}
	return req.attempt <= cfg.busyBound()
}

// busyBound is how many times BusyRetries sends a request again.
func (cfg *config) busyBound() int {
	switch {
	case cfg.busyRetries == 0:
		return DefaultBusyRetries
	case cfg.busyRetries < 0:
		return 0
	}
	return cfg.busyRetries
}

// tooLongRetryAfter reports a server's Retry-After longer than
// MaxRetryAfter allows.
func (cfg *config) tooLongRetryAfter(d time.Duration) bool {
	return cfg.maxRetryAfter > 0 && d > cfg.maxRetryAfter
}

// hostHold is how long a response's Retry-After holds its host: all of it,
// but no longer than MaxRetryAfter when that is set.
func (cfg *config) hostHold(retryAfter time.Duration) time.Duration {
	if cfg.tooLongRetryAfter(retryAfter) {
		return cfg.maxRetryAfter
	}
	return retryAfter
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
	reason := WaitBackoff
	if resp.retryAfter > 0 && resp.retryAfter >= delay {
		reason = WaitRetryAfter
	}
	until := time.Now().Add(delay)
	w := r.waits.begin(req, reason, resp.StatusCode, until)
	if err := r.front.retry(r.ctx, req, until); err != nil {
		r.waits.cancel(w)
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
	if req.attempt > r.cfg.busyBound() {
		return false
	}
	until := time.Now().Add(resp.retryAfter)
	w := r.waits.begin(req, WaitRetryAfter, resp.StatusCode, until)
	if err := r.front.retry(r.ctx, req, until); err != nil {
		r.waits.cancel(w)
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
	w := r.waits.begin(req, WaitRobots, 0, until)
	if err := r.front.retry(r.ctx, req, until); err != nil {
		r.waits.cancel(w)
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

// Why a request waits (Wait.Reason).
const (
	// WaitRetryAfter: the server answered with a Retry-After (a 429, or a
	// 503 with Retry-After, or a status a RetryPolicy retries).
	WaitRetryAfter = "Retry-After"
	// WaitBackoff: a RetryPolicy's back-off after a failure.
	WaitBackoff = "backoff"
	// WaitRobots: the host's robots.txt could not be fetched, and is
	// fetched again at Until.
	WaitRobots = "robots.txt"
)

// Wait is a request that waits in the frontier, holding no worker, before
// it is sent (again): Stats.Waits lists them while a crawl runs.
type Wait struct {
	// URL is the request's URL, its password redacted.
	URL    string `json:"url"`
	Method string `json:"method"`
	// Reason is why it waits: WaitRetryAfter, WaitBackoff or WaitRobots.
	Reason string `json:"reason"`
	// Status is the HTTP status that made it wait (429, 503, ...); 0 when
	// none did (a network error, robots.txt).
	Status int `json:"status,omitempty"`
	// Attempt counts the tries made so far (0 before the first).
	Attempt int `json:"attempt"`
	// Until is when it may go again; its host's turn may come later.
	Until time.Time `json:"until"`
}

// maxStatsWaits bounds Stats.Waits, as maxStatsHosts bounds Stats.Hosts.
const maxStatsWaits = 50

// waitList holds a run's waiting requests (Stats.Waits), keyed by method
// and URL: a retry comes back from the frontier as a copy, or (from a
// queue) as a new Request. An entry ends when its request leaves the
// frontier (left), or at its Until, whichever comes first: a request that
// another process leased, or whose URL a redirect changed, is not seen
// leaving. Safe for concurrent use; the zero value is empty.
type waitList struct {
	// n counts the entries, so that the feeder, which tells every request
	// it takes, skips the lock while nothing waits.
	n atomic.Int32
	// mu guards m.
	mu sync.Mutex
	m  map[string]Wait
}

// waitKey is the key of req's entry.
func waitKey(req *Request) string { return req.Method + " " + req.URL.String() }

// begin adds req's wait until until, and returns its key for cancel; a
// wait already over adds nothing.
func (l *waitList) begin(req *Request, reason string, status int, until time.Time) string {
	if !until.After(time.Now()) || req.URL == nil {
		return ""
	}
	k := waitKey(req)
	w := Wait{URL: req.URL.Redacted(), Method: req.Method, Reason: reason, Status: status, Attempt: req.attempt, Until: until}
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]Wait{}
	}
	l.m[k] = w
	l.n.Store(int32(len(l.m)))
	l.mu.Unlock()
	return k
}

// cancel removes the entry begin returned the key of (a retry that failed).
func (l *waitList) cancel(k string) {
	if k == "" {
		return
	}
	l.mu.Lock()
	delete(l.m, k)
	l.n.Store(int32(len(l.m)))
	l.mu.Unlock()
}

// left ends req's wait, if it had one: it left the frontier.
func (l *waitList) left(req *Request) {
	if l.n.Load() == 0 || req.URL == nil {
		return
	}
	l.cancel(waitKey(req))
}

// snapshot returns how many requests wait at now, and at most max of
// them, the longest wait first; it drops the entries whose time is over.
func (l *waitList) snapshot(now time.Time, max int) (int, []Wait) {
	if l.n.Load() == 0 {
		return 0, nil
	}
	l.mu.Lock()
	out := make([]Wait, 0, len(l.m))
	for k, w := range l.m {
		if !w.Until.After(now) {
			delete(l.m, k)
			continue
		}
		out = append(out, w)
	}
	l.n.Store(int32(len(l.m)))
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b Wait) int {
		if c := b.Until.Compare(a.Until); c != 0 {
			return c
		}
		return strings.Compare(a.URL, b.URL)
	})
	n := len(out)
	if len(out) > max {
		out = out[:max]
	}
	return n, out
}
