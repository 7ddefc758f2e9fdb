package magpie

import (
	"container/list"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie/limits"
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
	// maxRobotsHosts bounds the cache; the least recently used host goes
	// first. It must exceed the hosts a broad crawl keeps in rotation: a
	// cache smaller than that drops each host just before its next page
	// and fetches its robots.txt again for nearly every page (10,000 did
	// at 20,000 hosts). 40,000 small files (robotsEntryCost and a few
	// hundred bytes each) fit in maxRobotsCacheBytes.
	maxRobotsHosts = 40000
	// robotsEntryCost is what a host's entry costs besides its parsed
	// file (robotsCost): the entry, its list element, map slot, key and
	// channel, and the parsed rules' fixed part. A two-line robots.txt
	// measures about 1,400 bytes in all (TestRobotsCachePerHost).
	robotsEntryCost = 1024
	// maxRobotsCacheBytes bounds the memory the cache keeps, as estimated by
	// robotsCost: a robots.txt of 20,000 wildcard rules costs about 26 MiB
	// parsed, one of rules with 100 wildcards each about 78 MiB, so a count
	// of hosts alone does not bound it. One robots.txt that costs more than
	// the whole budget is still kept, alone, while it is the newest.
	maxRobotsCacheBytes = 64 << 20
	// robotsAttempts is how many times a robots.txt that answers 5xx (or
	// fails after its host was reached) is fetched before the host's URLs
	// are refused with ErrRobotsTxtUnavailable (RFC 9309 §2.3.1.4: complete
	// disallow while it is unreachable). Meanwhile the host's requests wait.
	robotsAttempts = 4
	// robotsDownTTL is how long a host whose robots.txt fetch could not
	// connect stays known as down: long enough that the check a request
	// gets at admission and the one before it is sent share one dial, short
	// enough that a host coming back is seen at once. Retries look again
	// whatever it says (see robotsCache.recheck).
	robotsDownTTL = time.Second
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

// hostDownError is the verdict of a robots.txt fetch that never reached its
// host: the connection was refused, the name did not resolve, the TLS
// handshake failed. The host's requests fail with it (to OnError, as the
// same request would without robots.txt), rather than being refused or
// made to wait for robots.txt retries that only a reachable server earns.
type hostDownError struct {
	Host string
	Err  error
}

func (e *hostDownError) Error() string {
	return fmt.Sprintf("host %s unreachable: %v", e.Host, e.Err)
}

func (e *hostDownError) Unwrap() error { return e.Err }

// hostUnreachable reports whether err, from a fetch, means that no
// connection to the server was made: dialling failed (refused, no route,
// timed out), the name did not resolve, a proxy could not be reached, or
// the TLS handshake failed. Errors after the connection was made (a reset,
// a timeout waiting for the response) are not: the server is there.
func hostUnreachable(err error) bool {
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && (oe.Op == "dial" || oe.Op == "proxyconnect" || oe.Op == "remote error") {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}

// robotsCache keeps parsed robots.txt per scheme://host:port for ttl.
// Concurrent first checks of one host share a single fetch. Status mapping,
// as RFC 9309 §2.3.1 says: 2xx parsed, 4xx allow all (the file is
// "unavailable"), 5xx and fetch errors disallow all for now (the file is
// "unreachable"). Safe for concurrent use.
//
// Further decisions:
//   - A fetch that cannot connect to the host (hostUnreachable) is no
//     robots.txt verdict: check returns a *hostDownError, kept for
//     robotsDownTTL, and the host's requests fail with it as they would
//     without robots.txt. A refusal by DenyPrivateNetworks is returned as
//     it is, for robotsErrorTTL.
//   - A robots.txt that answers 5xx, or whose fetch fails once the host
//     was reached, is fetched again after 1 s, 2 s and 4 s
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
//     robotsCost, plus robotsEntryCost per host) are kept; the least recently checked is dropped first, so
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
	// holds reports whether the check running under ctx is made by a
	// request that holds u's host's slot in the limiter. Such a check does
	// not wait for another's fetch of that robots.txt, which may be waiting
	// for that very slot (see fetchRobots): it returns a
	// *robotsPendingError due now, and the request waits without the slot.
	holds func(ctx context.Context, u *url.URL) bool

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
	// down is set when the fetch could not connect (a *hostDownError).
	down bool
	// cost is what the entry counts for in robotsCache.bytes:
	// robotsEntryCost from its creation, plus its parsed file's once done
	// (guarded by robotsCache.mu).
	cost int
}

// newRobotsCache returns an empty cache.
func newRobotsCache(ttl time.Duration, fetch robotsFetch) *robotsCache {
	if ttl <= 0 {
		ttl = defaultRobotsTTL
	}
	return &robotsCache{ttl: ttl, fetch: fetch, maxBytes: maxRobotsCacheBytes, retryBase: robotsRetryBase,
		holds: holdsSlot, entries: make(map[robotsHost]*list.Element), lru: list.New()}
}

// check reports whether userAgent may fetch u (path and query), and the
// Crawl-delay of the group that applies (0 if none).
func (rc *robotsCache) check(ctx context.Context, u *url.URL, userAgent string) (allowed bool, crawlDelay time.Duration, err error) {
	return rc.checkKey(ctx, u, userAgent, false)
}

// recheck is check for a request tried again: a host known to be down is
// asked again rather than taken as still down, so that each try of the
// request is one real attempt to reach it.
func (rc *robotsCache) recheck(ctx context.Context, u *url.URL, userAgent string) (allowed bool, crawlDelay time.Duration, err error) {
	return rc.checkKey(ctx, u, userAgent, true)
}

func (rc *robotsCache) checkKey(ctx context.Context, u *url.URL, userAgent string, fresh bool) (allowed bool, crawlDelay time.Duration, err error) {
	key := robotsKey(u)
	for {
		e, leader := rc.entry(key, fresh)
		fresh = false // one new fetch is enough
		if leader {
			robotsURL := robotsURLOf(u)
			rc.run(ctx, e, robotsURL)
			if rc.onSitemaps != nil && e.data != nil && len(e.data.Sitemaps) > 0 {
				rc.onSitemaps(robotsURL.String(), e.data.Sitemaps)
			}
		} else {
			select {
			case <-e.done:
			default:
				if rc.holds != nil && rc.holds(ctx, u) {
					return false, 0, &robotsPendingError{RobotsURL: robotsURLOf(u).String(), Until: time.Now(),
						Err: errRobotsInFlight}
				}
				select {
				case <-e.done:
				case <-ctx.Done():
					return false, 0, ctx.Err()
				}
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
// expired or marked for retry, or says the host is down and fresh is set;
// leader reports that the caller created it and must run the fetch.
func (rc *robotsCache) entry(key robotsHost, fresh bool) (e *robotsEntry, leader bool) {
	now := time.Now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	failures := 0
	if el, ok := rc.entries[key]; ok {
		e := el.Value.(*robotsEntry)
		select {
		case <-e.done:
			if !e.retry && now.Before(e.expires) && !(fresh && e.down) {
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
	e = &robotsEntry{key: key, done: make(chan struct{}), failures: failures, cost: robotsEntryCost}
	rc.entries[key] = rc.lru.PushFront(e)
	rc.bytes += e.cost
	rc.trim()
	return e, true
}

// known reports whether a check of u's host would fetch nothing: its
// robots.txt is cached and fresh, or being fetched.
func (rc *robotsCache) known(u *url.URL) bool {
	key := robotsKey(u)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	el, ok := rc.entries[key]
	if !ok {
		return false
	}
	e := el.Value.(*robotsEntry)
	select {
	case <-e.done:
		return !e.retry && time.Now().Before(e.expires)
	default:
		return true
	}
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
		e.cost += cost
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
		// Refused by DenyPrivateNetworks: no use trying again. The
		// refusal names the address, and travels as it is.
		if be, ok := errors.AsType[*BlockedAddressError](err); ok {
			err = be
		}
		e.err = err
		e.expires = time.Now().Add(min(robotsErrorTTL, rc.ttl))
		return
	}
	if err != nil && hostUnreachable(err) {
		e.down = true
		e.err = &hostDownError{Host: e.key.hostport, Err: err}
		e.expires = time.Now().Add(min(robotsDownTTL, rc.ttl))
		return
	}
	if err != nil {
		rc.unreachable(e, robotsURL, err)
		return
	}
	// Rules past the cost bound are ignored; the entry's own cost is in it.
	body, cost := robotsWithin(body, maxRobotsFileCost-robotsEntryCost)
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

// recheckRobots checks again, before it is sent, a request admitted while
// its host's robots.txt could not be read, for the User-Agent it was
// admitted with; a try after the first asks a host known to be down again,
// so that each try is a real attempt to reach it. Once robots.txt has
// answered, the request is not held for it again.
func (c *Collector) recheckRobots(ctx context.Context, cfg *config, req *Request) error {
	ctx, h := holding(ctx, req)
	if err := c.checkRobotsFresh(ctx, cfg, req.URL, req.robotsUA, req.attempt > 1); err != nil {
		return err
	}
	req.robotsWait = time.Time{}
	return spentSlot(req, h)
}

// checkRobotsAgain checks robots.txt for the User-Agent OnRequest set, when
// it differs from the one checked at admission.
func (c *Collector) checkRobotsAgain(ctx context.Context, cfg *config, req *Request, userAgent string) error {
	ctx, h := holding(ctx, req)
	if err := c.checkRobots(ctx, cfg, req.URL, userAgent); err != nil {
		return err
	}
	return spentSlot(req, h)
}

// robotsVerdict is how a robots.txt check's error fails a request about to
// be sent: a wait for robots.txt goes back to the frontier (see analyze), a
// host that is down fails to OnError, anything else is a refusal.
func robotsVerdict(err error) error {
	if _, ok := errors.AsType[*robotsPendingError](err); ok {
		return err
	}
	if _, ok := errors.AsType[*hostDownError](err); ok {
		return err
	}
	return &refusedInFetch{err}
}

// errRobotsInFlight is the cause of a wait for a robots.txt another check is
// fetching, given to a request that holds the host's slot (robotsCache.holds).
var errRobotsInFlight = errors.New("being fetched")

// robotsHolderKey keys a *robotsHolder in the context of a robots.txt check
// made by a request that holds its host's slot.
type robotsHolderKey struct{}

// robotsHolder is a request checking robots.txt while it holds its host's
// slot; spent is set when the robots.txt fetch took that slot's start.
type robotsHolder struct {
	req   *Request
	spent bool
}

// holding returns ctx marked as a check by req, which holds its host's slot.
func holding(ctx context.Context, req *Request) (context.Context, *robotsHolder) {
	h := &robotsHolder{req: req}
	return context.WithValue(ctx, robotsHolderKey{}, h), h
}

// slotHolder returns the request holding a host's slot on whose behalf ctx
// checks robots.txt: one marked by holding, or the request whose redirect
// is being checked. The holder is nil when the request's redirect is.
func slotHolder(ctx context.Context) (*Request, *robotsHolder) {
	if h, ok := ctx.Value(robotsHolderKey{}).(*robotsHolder); ok {
		return h.req, h
	}
	if st, ok := ctx.Value(fetchStateKey{}).(*fetchState); ok {
		return st.req, nil
	}
	return nil, nil
}

// holdsSlot implements robotsCache.holds.
func holdsSlot(ctx context.Context, u *url.URL) bool {
	req, _ := slotHolder(ctx)
	return req != nil && req.ticket != nil && strings.EqualFold(req.URL.Host, u.Host)
}

// robotsSlot returns the limiter ticket a robots.txt fetch of host starts
// under, for the fetch is a request to the host and keeps its spacing: the
// slot of the request checking, when it holds host's (held; that request
// must not also send in it, see spentSlot), else a start taken in the
// host's turn, waiting for it, which the caller must end with Done.
func (c *Collector) robotsSlot(ctx context.Context, host string) (t *limits.Ticket, held bool, err error) {
	if req, h := slotHolder(ctx); req != nil && req.ticket != nil && strings.EqualFold(req.URL.Host, host) {
		if h != nil {
			h.spent = true
		}
		return req.ticket, true, nil
	}
	t, err = c.shared.limiter.Acquire(ctx, host)
	return t, false, err
}

// spentSlot is the error that sends a request back to wait for its host's
// next turn, when the robots.txt fetch its check made took its slot's start
// and the host spaces its starts.
func spentSlot(req *Request, h *robotsHolder) error {
	if !h.spent || !req.ticket.HasGap() {
		return nil
	}
	return &robotsPendingError{RobotsURL: robotsURLOf(req.URL).String(), Until: time.Now(), Err: errRobotsSpentSlot}
}

// errRobotsSpentSlot is the cause of a request's wait for its host's next
// turn after the robots.txt fetch took its turn.
var errRobotsSpentSlot = errors.New("fetched in the request's turn")
