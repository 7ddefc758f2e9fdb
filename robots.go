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
)

// robotsCache keeps parsed robots.txt per scheme://host:port for ttl.
// Concurrent first checks of one host share a single fetch. Status mapping:
// 2xx parsed, 4xx allow all, 5xx disallow all, fetch error returned. Safe for
// concurrent use.
//
// Further decisions:
//   - A fetch error is returned to every check that shared the fetch and is
//     remembered for robotsErrorTTL (at most ttl), so a dead host is not asked
//     again for every page. Errors caused by the fetching check's own context
//     (cancelled, deadline) are not remembered: the checks that were waiting on
//     it fetch again with their own contexts.
//   - A robots.txt that does not parse, and statuses outside 2xx/4xx/5xx (for
//     example a 3xx the fetch did not follow), allow everything, as Google's
//     crawler does.
//   - At most maxRobotsHosts hosts are kept; the least recently checked is
//     dropped first, so long crawls do not grow without bound.
type robotsCache struct {
	ttl   time.Duration
	fetch robotsFetch

	// mu guards entries and lru.
	mu      sync.Mutex
	entries map[robotsHost]*list.Element // value: *robotsEntry
	lru     *list.List                   // front: most recently checked
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
}

// newRobotsCache returns an empty cache.
func newRobotsCache(ttl time.Duration, fetch robotsFetch) *robotsCache {
	if ttl <= 0 {
		ttl = defaultRobotsTTL
	}
	return &robotsCache{ttl: ttl, fetch: fetch, entries: make(map[robotsHost]*list.Element), lru: list.New()}
}

// check reports whether userAgent may fetch u (path and query), and the
// Crawl-delay of the group that applies (0 if none).
func (rc *robotsCache) check(ctx context.Context, u *url.URL, userAgent string) (allowed bool, crawlDelay time.Duration, err error) {
	key := robotsKey(u)
	for {
		e, leader := rc.entry(key)
		if leader {
			rc.run(ctx, e, robotsURLOf(u))
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
	if el, ok := rc.entries[key]; ok {
		e := el.Value.(*robotsEntry)
		select {
		case <-e.done:
			if !e.retry && now.Before(e.expires) {
				rc.lru.MoveToFront(el)
				return e, false
			}
			rc.lru.Remove(el)
			delete(rc.entries, key)
		default:
			rc.lru.MoveToFront(el)
			return e, false // in flight
		}
	}
	e = &robotsEntry{key: key, done: make(chan struct{})}
	rc.entries[key] = rc.lru.PushFront(e)
	for rc.lru.Len() > maxRobotsHosts {
		// Dropping an entry in flight is harmless: its waiters hold the
		// pointer and still get the result; it just is not kept.
		old := rc.lru.Remove(rc.lru.Back()).(*robotsEntry)
		delete(rc.entries, old.key)
	}
	return e, true
}

// run fetches and parses robotsURL into e and closes e.done, whatever
// happens (a panic in the fetch function becomes an error), so that no waiter
// can hang.
func (rc *robotsCache) run(ctx context.Context, e *robotsEntry, robotsURL *url.URL) {
	defer close(e.done)
	defer func() {
		if p := recover(); p != nil {
			e.data = nil
			e.err = fmt.Errorf("magpie: robots.txt %s: fetch panicked: %v", robotsURL, p)
			e.expires = time.Now().Add(min(robotsErrorTTL, rc.ttl))
		}
	}()
	status, body, err := rc.fetch(ctx, robotsURL)
	if err != nil {
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			e.retry = true
		}
		e.err = fmt.Errorf("magpie: robots.txt %s: %w", robotsURL, err)
		e.expires = time.Now().Add(min(robotsErrorTTL, rc.ttl))
		return
	}
	e.data = parseRobots(status, body)
	e.expires = time.Now().Add(rc.ttl)
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
