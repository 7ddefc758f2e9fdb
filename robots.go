package magpie

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"
)

// robotsFetch fetches robotsURL and returns its status and body; the
// Collector supplies it so the fetch uses its client, User-Agent and context.
type robotsFetch func(ctx context.Context, robotsURL *url.URL) (status int, body []byte, err error)

const (
	// defaultRobotsTTL is how long a robots.txt is trusted when newRobotsCache
	// gets ttl <= 0. Google re-reads robots.txt about once a day; an hour keeps
	// long crawls reasonably current without refetching for every page.
	defaultRobotsTTL = time.Hour
	// robotsErrorTTL bounds how long a failed fetch is remembered: long enough
	// that a host that is down is not asked for robots.txt before every page,
	// short enough that it is retried soon after it comes back.
	robotsErrorTTL = time.Minute
	// maxRobotsHosts bounds the cache; the least recently used host goes first.
	maxRobotsHosts = 10000
	// maxRobotsCacheBytes bounds the memory the cache keeps, as estimated by
	// robotsCost: a robots.txt of 20,000 wildcard rules costs about 26 MiB
	// parsed, one of rules with 100 wildcards each about 78 MiB, so a count
	// of hosts alone does not bound it. One robots.txt that costs more than
	// the whole budget is still kept, alone, while it is the newest.
	maxRobotsCacheBytes = 64 << 20
	// robotsAttempts is how many times a robots.txt that answers 5xx or
	// cannot be reached is fetched before the host's URLs are refused with
	// ErrRobotsTxtUnavailable (RFC 9309 §2.3.1.4: complete disallow while it
	// is unreachable). Meanwhile the host's requests wait.
	robotsAttempts = 4
	// robotsRetryBase is the wait after the first failed attempt; it doubles
	// after each one (1 s, 2 s, 4 s).
	robotsRetryBase = time.Second
)

// robotsPendingError is returned by robotsCache.check while a host's
// robots.txt is unreachable and its fetch will be tried again: the request
// must wait until Until, not be refused.
type robotsPendingError struct {
	RobotsURL string
	Until     time.Time
	Err       error
}

func (e *robotsPendingError) Error() string {
	return fmt.Sprintf("robots.txt %s unreachable, trying again at %s: %v", e.RobotsURL, e.Until.Format(time.RFC3339), e.Err)
}

func (e *robotsPendingError) Unwrap() error { return e.Err }

// robotsCache keeps parsed robots.txt per scheme://host:port for ttl.
// Concurrent first checks of one host share a single fetch. Status mapping,
// as RFC 9309 §2.3.1 says: 2xx parsed, 4xx allow all (the file is
// "unavailable"), 5xx and fetch errors disallow all for now (the file is
// "unreachable"). Safe for concurrent use.
//
// Further decisions:
//   - An unreachable robots.txt is fetched again after 1 s, 2 s and 4 s
//     (robotsAttempts in all); until then check returns a
//     *robotsPendingError saying when, and the host's requests wait. Once the
//     attempts are spent, check returns ErrRobotsTxtUnavailable for
//     robotsErrorTTL (at most ttl), after which a fresh round of attempts
//     begins. Errors caused by the fetching check's own context (cancelled,
//     deadline) are not remembered: the checks that were waiting on it fetch
//     again with their own contexts.
//   - A robots.txt that does not parse, and statuses outside 2xx/4xx/5xx (for
//     example a 3xx the fetch did not follow), allow everything, as Google's
//     crawler does.
//   - At most maxRobotsHosts hosts and maxRobotsCacheBytes (estimated by
//     robotsCost) are kept; the least recently checked is dropped first, so
//     long crawls, and hosts with huge robots.txt files, do not grow it
//     without bound. What is parsed is capped by the fetch (maxRobotsSize).
type robotsCache struct {
	ttl      time.Duration
	fetch    robotsFetch
	maxBytes int
	// retryBase is robotsRetryBase, shortened by tests of whole crawls.
	retryBase time.Duration
	// onSitemaps, when set, is given the Sitemap: lines of each robots.txt
	// fetched, once its entry is done (so that it may admit requests).
	onSitemaps func(robotsURL string, urls []string)

	// mu guards entries, lru and bytes.
	mu      sync.Mutex
	entries map[robotsHost]*list.Element // value: *robotsEntry
	lru     *list.List                   // front: most recently checked
	bytes   int                          // sum of the kept entries' cost
}

// robotsEntry is one host's robots.txt, or the fetch in flight for it.
type robotsEntry struct {
	key robotsHost
	// done is closed when the fields below are set; they never change after.
	done chan struct{}
	data *robotstxt.RobotsData
	err  error
	// retry is set when the fetch failed because of the fetching check's own
	// context; waiters then fetch again themselves.
	retry   bool
	expires time.Time
	// failures counts the host's consecutive unreachable attempts, this one
	// included once the fetch is done; pending is set while more remain.
	failures int
	pending  bool
	// cost is what the entry counts for in robotsCache.bytes (guarded by
	// robotsCache.mu).
	cost int
}

// newRobotsCache returns an empty cache.
func newRobotsCache(ttl time.Duration, fetch robotsFetch) *robotsCache {
	if ttl <= 0 {
		ttl = defaultRobotsTTL
	}
	return &robotsCache{ttl: ttl, fetch: fetch, maxBytes: maxRobotsCacheBytes, retryBase: robotsRetryBase,
		entries: make(map[robotsHost]*list.Element), lru: list.New()}
}

// check reports whether userAgent may fetch u (path and query), and the
// Crawl-delay of the group that applies (0 if none).
func (rc *robotsCache) check(ctx context.Context, u *url.URL, userAgent string) (allowed bool, crawlDelay time.Duration, err error) {
	key := robotsKey(u)
	for {
		e, leader := rc.entry(key)
		if leader {
			robotsURL := robotsURLOf(u)
			rc.run(ctx, e, robotsURL)
			if rc.onSitemaps != nil && e.data != nil && len(e.data.Sitemaps) > 0 {
				rc.onSitemaps(robotsURL.String(), e.data.Sitemaps)
			}
		} else {
			select {
			case <-e.done:
			case <-ctx.Done():
				return false, 0, ctx.Err()
			}
		}
		if e.retry {
			if err := ctx.Err(); err != nil {
				return false, 0, err
			}
			continue
		}
		if e.err != nil {
			return false, 0, e.err
		}
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		if u.RawQuery != "" {
			p += "?" + u.RawQuery
		}
		return e.data.TestAgent(p, userAgent), e.data.FindGroup(userAgent).CrawlDelay, nil
	}
}

// entry returns the live entry for key, creating it when it is absent,
// expired or marked for retry; leader reports that the caller created it and
// must run the fetch.
func (rc *robotsCache) entry(key robotsHost) (e *robotsEntry, leader bool) {
	now := time.Now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	failures := 0
	if el, ok := rc.entries[key]; ok {
		e := el.Value.(*robotsEntry)
		select {
		case <-e.done:
			if !e.retry && now.Before(e.expires) {
				rc.lru.MoveToFront(el)
				return e, false
			}
			if e.pending {
				failures = e.failures // the next attempt of the same round
			}
			rc.remove(el)
		default:
			rc.lru.MoveToFront(el)
			return e, false // in flight
		}
	}
	e = &robotsEntry{key: key, done: make(chan struct{}), failures: failures}
	rc.entries[key] = rc.lru.PushFront(e)
	rc.trim()
	return e, true
}

// remove drops el from the cache; called under mu.
func (rc *robotsCache) remove(el *list.Element) {
	e := rc.lru.Remove(el).(*robotsEntry)
	delete(rc.entries, e.key)
	rc.bytes -= e.cost
	e.cost = 0
}

// trim drops the least recently checked entries until the cache is within
// its bounds, keeping at least the newest; called under mu. Dropping an
// entry in flight is harmless: its waiters hold the pointer and still get
// the result; it just is not kept.
func (rc *robotsCache) trim() {
	for rc.lru.Len() > 1 && (rc.lru.Len() > maxRobotsHosts || rc.bytes > rc.maxBytes) {
		rc.remove(rc.lru.Back())
	}
}

// account charges e's cost to the cache once its fetch is done, if e is
// still kept, and trims the cache.
func (rc *robotsCache) account(e *robotsEntry, cost int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if el, ok := rc.entries[e.key]; ok && el.Value.(*robotsEntry) == e {
		e.cost = cost
		rc.bytes += cost
		rc.lru.MoveToFront(el)
		rc.trim()
	}
}

// run fetches and parses robotsURL into e and closes e.done, whatever
// happens (a panic in the fetch function becomes an error), so that no waiter
// can hang.
func (rc *robotsCache) run(ctx context.Context, e *robotsEntry, robotsURL *url.URL) {
	defer close(e.done)
	defer func() {
		if p := recover(); p != nil {
			e.data = nil
			e.err = fmt.Errorf("%w: %s: fetch panicked: %v", ErrRobotsTxtUnavailable, robotsURL, p)
			e.expires = time.Now().Add(min(robotsErrorTTL, rc.ttl))
		}
	}()
	status, body, err := rc.fetch(ctx, robotsURL)
	if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		e.retry = true
		e.err = fmt.Errorf("magpie: robots.txt %s: %w", robotsURL, err)
		return
	}
	if err == nil && status >= 500 && status <= 599 {
		err = fmt.Errorf("server error %d", status)
	}
	if errors.Is(err, ErrPrivateNetwork) {
		// Refused by DenyPrivateNetworks: no use trying again.
		e.err = err
		e.expires = time.Now().Add(min(robotsErrorTTL, rc.ttl))
		return
	}
	if err != nil {
		rc.unreachable(e, robotsURL, err)
		return
	}
	body, cost := robotsWithin(body, maxRobotsFileCost) // rules past the cost bound are ignored
	e.data = parseRobots(status, body)
	e.expires = time.Now().Add(rc.ttl)
	rc.account(e, cost)
}

// unreachable records a failed attempt: pending with a backoff while
// attempts remain, ErrRobotsTxtUnavailable once they are spent.
func (rc *robotsCache) unreachable(e *robotsEntry, robotsURL *url.URL, err error) {
	e.failures++
	now := time.Now()
	if e.failures < robotsAttempts {
		e.pending = true
		e.expires = now.Add(rc.retryBase << (e.failures - 1))
		e.err = &robotsPendingError{RobotsURL: robotsURL.String(), Until: e.expires, Err: err}
		return
	}
	e.expires = now.Add(min(robotsErrorTTL, rc.ttl))
	e.err = fmt.Errorf("%w: %s unreachable after %d attempts: %w", ErrRobotsTxtUnavailable, robotsURL, e.failures, err)
}

// allowAllRobots is what an unusable robots.txt means.
var allowAllRobots, _ = robotstxt.FromStatusAndBytes(404, nil)

// parseRobots maps a robots.txt response to rules; it never fails and never
// panics (the parser is third-party code fed by any server).
func parseRobots(status int, body []byte) (data *robotstxt.RobotsData) {
	defer func() {
		if recover() != nil {
			data = allowAllRobots
		}
	}()
	data, err := robotstxt.FromStatusAndBytes(status, body)
	if err != nil || data == nil {
		return allowAllRobots
	}
	return data
}

// robotsHost is a robots cache key: scheme and host:port, lowercase, with
// the scheme's default port made explicit. A struct rather than one string so
// that building it for every check allocates nothing in the common case.
type robotsHost struct{ scheme, hostport string }

// String returns the key as scheme://host:port.
func (k robotsHost) String() string { return k.scheme + "://" + k.hostport }

// robotsKey returns the cache key of u's host.
func robotsKey(u *url.URL) robotsHost {
	scheme := strings.ToLower(u.Scheme)
	if u.Port() != "" {
		// u.Host is then host:port already, brackets and all, as
		// net.JoinHostPort would write it; ToLower copies only on change.
		return robotsHost{scheme, strings.ToLower(u.Host)}
	}
	port := "80"
	switch scheme {
	case "https", "wss":
		port = "443"
	}
	return robotsHost{scheme, net.JoinHostPort(strings.ToLower(u.Hostname()), port)}
}

// robotsURLOf returns the robots.txt URL of u's host.
func robotsURLOf(u *url.URL) *url.URL {
	return &url.URL{Scheme: strings.ToLower(u.Scheme), Host: u.Host, Path: "/robots.txt"}
}
