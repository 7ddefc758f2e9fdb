//lint:file-ignore ST1005 the sentinel texts are Colly's, kept so that code matching them keeps working

package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/storage"
)

// Sentinel errors keep Colly's names and texts so that code and tests written
// for Colly can branch on them unchanged. Compare with errors.Is.
var (
	// ErrForbiddenDomain is returned when a request's host is in DisallowedDomains
	// or not in a non-empty AllowedDomains.
	ErrForbiddenDomain = errors.New("Forbidden domain")
	// ErrMissingURL is returned when a request has no URL.
	ErrMissingURL = errors.New("Missing URL")
	// ErrMaxDepth is returned when a request is deeper than MaxDepth.
	ErrMaxDepth = errors.New("Max depth limit reached")
	// ErrForbiddenURL is returned when a URL matches one of DisallowedURLFilters.
	ErrForbiddenURL = errors.New("ForbiddenURL")
	// ErrNoURLFiltersMatch is returned when URLFilters is set and no filter matches the URL.
	ErrNoURLFiltersMatch = errors.New("No URLFilters match")
	// ErrRobotsTxtBlocked is returned when robots.txt forbids the URL for the User-Agent sent.
	ErrRobotsTxtBlocked = errors.New("URL blocked by robots.txt")
	// ErrNoCookieJar is returned by SetCookies when cookies are disabled.
	ErrNoCookieJar = errors.New("Cookie jar is not available")
	// ErrNoPattern is returned by Limit when a LimitRule has neither DomainGlob nor DomainRegexp.
	ErrNoPattern = limits.ErrNoPattern
	// ErrEmptyProxyURL is returned when a proxy switcher is given no proxy URL.
	ErrEmptyProxyURL = errors.New("Proxy URL list is empty")
	// ErrAbortedAfterHeaders is returned when an OnResponseHeaders callback aborts the request.
	ErrAbortedAfterHeaders = errors.New("Aborted after receiving response headers")
	// ErrAbortedBeforeRequest is returned when an OnRequestHeaders callback aborts the request.
	ErrAbortedBeforeRequest = errors.New("Aborted before Do Request")
	// ErrQueueFull is returned when a queue storage has reached its MaxSize.
	ErrQueueFull = storage.ErrQueueFull
	// ErrMaxRequests is returned when MaxRequests requests have already been admitted.
	ErrMaxRequests = errors.New("Max Requests limit reached")
	// ErrMaxRequestsPerHost is returned when a request's host has had its
	// MaxRequestsPerHost requests admitted already.
	ErrMaxRequestsPerHost = errors.New("Max requests per host limit reached")
	// ErrNegativeBudget is returned (wrapped) when a per-host budget is
	// below 0: by Limit for a LimitRule's MaxRequestsPerHost, and by the
	// Visit or RunQueue that would start a crawl for the
	// MaxRequestsPerHost option's.
	ErrNegativeBudget = limits.ErrNegativeBudget
	// ErrPriorityRange is returned (wrapped) when a request's Priority, or
	// the Prioritize hook's answer for it, does not fit in an int32: the
	// request is refused (OnRefused, Stats().Refused["priority"]).
	ErrPriorityRange = storage.ErrPriorityRange
	// ErrRetryBodyUnseekable is returned by Request.Retry when the body cannot be rewound.
	ErrRetryBodyUnseekable = errors.New("Retry Body Unseekable")
	// ErrDropItem is returned (wrapped or not) by an ItemProcessor to drop
	// an item: it is counted as dropped, not reported as an error.
	ErrDropItem = errors.New("item dropped")
	// ErrRobotsTxtUnavailable is returned when a host's robots.txt could not
	// be fetched, so its URLs are refused for now; it is not a Disallow.
	ErrRobotsTxtUnavailable = errors.New("robots.txt unavailable")
)

// refusedInFetch marks a refusal found when a request was about to be sent
// (robots.txt checked again for the User-Agent OnRequest set, or once an
// unreachable robots.txt was fetched again): it goes to OnRefused, not
// OnError.
type refusedInFetch struct{ err error }

func (e *refusedInFetch) Error() string { return e.err.Error() }
func (e *refusedInFetch) Unwrap() error { return e.err }

// AlreadyVisitedError is returned when a request's visited key (canonical URL,
// method and body) has been seen before and AllowURLRevisit is off. Redirects
// to a visited URL return it too, with Destination set to the redirect target.
type AlreadyVisitedError struct {
	// Destination is the URL that was already visited.
	Destination *url.URL
}

// Error implements error.
func (e *AlreadyVisitedError) Error() string {
	return fmt.Sprintf("%q already visited", e.Destination.Redacted())
}

// HTTPError is the error for a response whose status is 300 or above (when
// ParseHTTPErrorResponse is off). Branch on it with errors.As.
type HTTPError struct {
	// StatusCode is the response status, for example 404.
	StatusCode int
	// Status is the status line text, for example "404 Not Found".
	Status string
}

// Error returns the status text, as Colly's status errors do (for example "Not Found").
func (e *HTTPError) Error() string {
	if t := http.StatusText(e.StatusCode); t != "" {
		return t
	}
	return e.Status
}

// More sentinels, beyond Colly's.
var (
	// ErrInvalidURL is returned when a URL cannot be parsed.
	ErrInvalidURL = errors.New("invalid URL")
	// ErrUnsupportedScheme is returned for URLs whose scheme is not http or https.
	ErrUnsupportedScheme = errors.New("unsupported URL scheme")
	// ErrCallbackPanic is wrapped by the error delivered to OnError when a
	// callback panicked; the crawl goes on.
	ErrCallbackPanic = errors.New("callback panicked")
	// ErrCallbackGoexit is wrapped, with ErrCallbackPanic, by the error
	// delivered to OnError when a callback called runtime.Goexit (as
	// t.FailNow does): the request is reported like a panic and the crawl
	// goes on.
	ErrCallbackGoexit = errors.New("callback called runtime.Goexit")
	// ErrStopped is returned for requests that were admitted but discarded by Stop.
	ErrStopped = errors.New("collector stopped")
	// ErrTooManyRedirects is returned when a request is redirected more than 10 times.
	ErrTooManyRedirects = errors.New("stopped after 10 redirects")
	// ErrUndecodableRequest is wrapped by the error RunQueue reports for a queue
	// entry that Request.Marshal did not produce.
	ErrUndecodableRequest = errors.New("undecodable queued request")
	// ErrRetryAfterTooLong is wrapped, with the response's *HTTPError, by the
	// error delivered to OnError when a server's Retry-After is longer than
	// MaxRetryAfter allows: the request failed at once instead of waiting.
	ErrRetryAfterTooLong = errors.New("server busy: Retry-After too long")
	// ErrHostBlocked is returned, and delivered to OnRefused, for a request
	// to a host that BlockHost blocked.
	ErrHostBlocked = errors.New("host blocked")
	// ErrInvalidHost is returned by BlockHost and UnblockHost for a host
	// that is empty or not a host[:port].
	ErrInvalidHost = errors.New("invalid host")
	// ErrNoCrawl is returned by AddSeed and FrontierHead when the
	// collector runs no crawl.
	ErrNoCrawl = errors.New("no crawl running")
)

// CallbackPanicError is the error for a recovered callback panic; errors.Is(err, ErrCallbackPanic) holds.
type CallbackPanicError struct {
	// Callback names the kind of callback, for example "OnHTML".
	Callback string
	// Value is what the callback panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *CallbackPanicError) Error() string {
	return fmt.Sprintf("%s callback panicked: %v", e.Callback, e.Value)
}

// Unwrap returns ErrCallbackPanic, and the panic value when it is an error.
func (e *CallbackPanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrCallbackPanic, err}
	}
	return []error{ErrCallbackPanic}
}

// RetryError is the final error of a request that failed after retries. It
// wraps the last attempt's error.
type RetryError struct {
	// Attempts is how many times the request was tried.
	Attempts int
	// Err is the last attempt's error.
	Err error
}

// Error implements error.
func (e *RetryError) Error() string {
	return fmt.Sprintf("giving up after %d attempts: %v", e.Attempts, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

// ErrStorageUnavailable is wrapped by every *StorageError: a storage
// operation (the queue or the visited set) failed, and magpie retries it
// with backoff rather than lose the work. Branch on it with errors.Is.
var ErrStorageUnavailable = errors.New("storage unavailable")

// StorageError reports a failed storage operation during a crawl. OnError
// receives one per kind of operation (Op) when a storage outage begins, not
// one per retry; the logger gets a Warn per retry and an Info on recovery.
// errors.Is(err, ErrStorageUnavailable) holds, and so does errors.Is against
// Err.
type StorageError struct {
	// Op names the operation: "push", "lease", "ack", "release", "len" or
	// "visited".
	Op string
	// Err is the storage's error.
	Err error
}

// Error implements error.
func (e *StorageError) Error() string {
	return fmt.Sprintf("storage %s: %v", e.Op, e.Err)
}

// Unwrap returns ErrStorageUnavailable and the storage's error.
func (e *StorageError) Unwrap() []error { return []error{ErrStorageUnavailable, e.Err} }

// ErrFrontierFull is returned (and reported to OnRefused, counted in
// Stats().Refused["frontier_full"]) when a request is admitted to an
// in-memory crawl that already holds MaxPending requests admitted and not
// finished. The request is not marked visited, so a later link to it is
// admitted once there is room.
var ErrFrontierFull = errors.New("in-memory frontier full (MaxPending)")

// ErrInformationalResponse is returned when a server answers a request with
// a 1xx status as its final response (a 101 Switching Protocols to a request
// that asked for no upgrade): the request failed (OnError), and its
// connection is closed unread.
var ErrInformationalResponse = errors.New("final response with a 1xx status")

// ErrCallbackStuck is wrapped by every *CallbackStuckError: a callback did
// not return within the stop grace period (StopGrace) after its crawl was
// stopped, so the crawl was ended without it.
var ErrCallbackStuck = errors.New("callback did not return")

// CallbackStuckError reports a callback that was still running StopGrace
// after its crawl was told to stop (Stop, the end of RunQueue's context).
// Go cannot stop a goroutine from outside: the goroutine running the
// callback is abandoned, still blocked in user code, and everything the
// crawl itself started has exited. Its request is not finished: a queue
// run releases its entry (not acknowledged) for the next run. Stop and
// RunQueue return it, a sync Visit of that page too, and OnError receives
// it; errors.Is(err, ErrCallbackStuck) holds. The StdlibContext ending
// counts as a stop for this: a callback still running StopGrace after it is
// abandoned, so that Visit and Wait return. Should the callback return
// later, the rest of its page's callbacks run on that goroutine, the links
// they visit are refused (ErrStopped) and the page is not finished again.
type CallbackStuckError struct {
	// Callback is the kind of callback, for example "OnHTML".
	Callback string
	// Selector is the OnHTML selector or OnXML query ("" for other kinds).
	Selector string
	// URL is the URL of the request whose callback is stuck.
	URL string
	// Running is how long the request's stage had been running when it
	// was abandoned.
	Running time.Duration
}

// Error implements error.
func (e *CallbackStuckError) Error() string {
	name := e.Callback
	if e.Selector != "" {
		name += fmt.Sprintf("(%q)", e.Selector)
	}
	return fmt.Sprintf("%s callback for %s did not return after %v; abandoned", name, e.URL, e.Running.Round(time.Millisecond))
}

// Unwrap returns ErrCallbackStuck.
func (e *CallbackStuckError) Unwrap() error { return ErrCallbackStuck }
