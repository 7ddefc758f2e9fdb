package magpie

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/idna"
)

// steering is what a person (or a program) changes on a running crawl:
// whether requests may start, and the hosts whose links are refused.
type steering struct {
	// pauseMu serialises Pause and Resume, so that resumed is replaced
	// and closed by one of them at a time.
	pauseMu sync.Mutex
	// resumed is nil while the collector is not paused; while it is, it
	// points to a channel that Resume closes.
	resumed atomic.Pointer[chan struct{}]
	// blockMu serialises BlockHost and UnblockHost, which replace blocked.
	blockMu sync.Mutex
	// blocked holds the blocked hosts' keys (blockKey), copied on every
	// change so that admission reads it without a lock; nil when none.
	blocked atomic.Pointer[map[string]struct{}]
	// pausedHook, set by tests before a crawl, is called each time a
	// request about to start is held by the pause (run.submit).
	pausedHook func()
}

// Pause stops the collector from starting requests (not in Colly): while it
// is paused, no request is sent, in every mode (sync or async Visit,
// RunQueue over any storage), and no robots.txt is fetched for a host whose
// robots.txt is not known yet (its requests are checked when they are
// about to start), except for a Visit made during a queue run from outside
// its callbacks. Requests in flight finish as usual: their
// callbacks run, and the links they find are admitted and queued, to start
// once the crawl resumes. Nothing is dropped; a queue run keeps renewing
// the leases it holds, so its entries are not taken over by another
// consumer however long the pause.
//
// A paused crawl is not done: Wait, a sync Visit and RunQueue do not return
// while requests wait, until Resume. Stop ends a paused crawl as any other
// (what waits is dropped, or released back to the queue, and counted in
// Stats.NotStarted), as does RunQueue's context or the StdlibContext
// ending. The pause belongs to the collector, not to one crawl: a crawl
// started while paused waits for Resume before its first request, and a
// crawl stopped while paused leaves the collector paused.
//
// Pause and Resume are idempotent and safe for concurrent use, from any
// goroutine, callbacks included; neither waits for the crawl.
func (c *Collector) Pause() {
	c.steer.pauseMu.Lock()
	defer c.steer.pauseMu.Unlock()
	if c.steer.resumed.Load() == nil {
		ch := make(chan struct{})
		c.steer.resumed.Store(&ch)
	}
}

// Resume lets a paused collector start requests again (see Pause); the
// requests that waited start in the order they would have.
func (c *Collector) Resume() {
	c.steer.pauseMu.Lock()
	defer c.steer.pauseMu.Unlock()
	if ch := c.steer.resumed.Load(); ch != nil {
		c.steer.resumed.Store(nil)
		close(*ch)
	}
}

// Paused reports whether the collector is paused (see Pause).
func (c *Collector) Paused() bool { return c.steer.resumed.Load() != nil }

// awaitResume returns nil at once when the collector is not paused, else
// once Resume is called, or ctx's error when ctx ends first.
func (c *Collector) awaitResume(ctx context.Context) error {
	ch := c.steer.resumed.Load()
	if ch == nil {
		return nil
	}
	if h := c.steer.pausedHook; h != nil {
		h()
	}
	select {
	case <-*ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BlockHost refuses every request to host from now on (not in Colly): new
// links and Visits are refused at admission, and requests already queued
// are refused when they would start (a queue run acknowledges their
// entries, as for any refusal), and a redirect to host fails at that hop
// (to OnError, wrapping ErrHostBlocked). Each refusal is returned or delivered to
// OnRefused with ErrHostBlocked and counted in Stats.Refused["blocked"].
// Requests to host in flight finish.
//
// host is a host name or IP address, with or without a port, as in a URL
// ("example.com", "Example.COM:8080", "[::1]:8443", "bücher.example"): case
// and internationalised names are matched as URLs are (IDNA), and a host
// without a port is blocked on every port. A host the crawl has not met is
// blocked all the same, for when it does. An empty or malformed host
// returns an error wrapping ErrInvalidHost, and blocks nothing.
//
// The block belongs to the collector and outlives the crawl; UnblockHost
// lifts it. Safe for concurrent use, callbacks included.
func (c *Collector) BlockHost(host string) error {
	key, err := blockKey(host)
	if err != nil {
		return err
	}
	c.steer.blockMu.Lock()
	defer c.steer.blockMu.Unlock()
	m := map[string]struct{}{}
	if old := c.steer.blocked.Load(); old != nil {
		if _, ok := (*old)[key]; ok {
			return nil
		}
		maps.Copy(m, *old)
	}
	m[key] = struct{}{}
	c.steer.blocked.Store(&m)
	return nil
}

// UnblockHost lifts a block BlockHost set on host (written the same way);
// requests refused meanwhile stay refused. Unblocking a host that is not
// blocked does nothing; an empty or malformed host returns an error
// wrapping ErrInvalidHost.
func (c *Collector) UnblockHost(host string) error {
	key, err := blockKey(host)
	if err != nil {
		return err
	}
	c.steer.blockMu.Lock()
	defer c.steer.blockMu.Unlock()
	old := c.steer.blocked.Load()
	if old == nil {
		return nil
	}
	if _, ok := (*old)[key]; !ok {
		return nil
	}
	m := maps.Clone(*old)
	delete(m, key)
	if len(m) == 0 {
		c.steer.blocked.Store(nil)
		return nil
	}
	c.steer.blocked.Store(&m)
	return nil
}

// blockKey is the key BlockHost files host under: its ASCII (IDNA) name,
// lower-cased, joined with its port when it has one.
func blockKey(host string) (string, error) {
	invalid := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidHost, host, why) }
	h := strings.TrimSpace(host)
	if h == "" {
		return "", invalid("empty")
	}
	if strings.ContainsAny(h, "/?#@\\ ") {
		return "", invalid("not a host[:port]")
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), nil // an address without brackets: no port
	}
	u, err := url.Parse("http://" + h)
	if err != nil || u.Host != h || u.Hostname() == "" {
		return "", invalid("not a host[:port]")
	}
	name := strings.TrimSuffix(u.Hostname(), ".")
	if name == "" {
		return "", invalid("no host name")
	}
	if isASCII(name) {
		name = strings.ToLower(name)
	} else if name, err = idna.Lookup.ToASCII(name); err != nil {
		return "", invalid(err.Error())
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(h, ":") {
			return "", invalid("empty port")
		}
		return name, nil
	}
	return net.JoinHostPort(name, port), nil
}

// checkBlocked returns an error wrapping ErrHostBlocked when u's host is
// blocked (BlockHost), on every port or on u's (the scheme's default one
// when u names none).
func (c *Collector) checkBlocked(u *url.URL) error {
	bp := c.steer.blocked.Load()
	if bp == nil || u == nil {
		return nil
	}
	name := strings.TrimSuffix(u.Hostname(), ".")
	if name == "" {
		return nil
	}
	name = asciiHost(name)
	if ip := net.ParseIP(name); ip != nil {
		name = ip.String() // as blockKey writes it
	}
	if _, ok := (*bp)[name]; ok {
		return fmt.Errorf("%w: %s", ErrHostBlocked, name)
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return nil
		}
	}
	key := net.JoinHostPort(name, port)
	if _, ok := (*bp)[key]; ok {
		return fmt.Errorf("%w: %s", ErrHostBlocked, key)
	}
	return nil
}

// errPausedRobots is the cause of a wait for a robots.txt that admission
// did not fetch because the collector was paused.
var errPausedRobots = errors.New("not fetched while paused")

// robotsWhilePaused keeps admission from fetching a robots.txt while the
// collector is paused: for a host whose robots.txt is not known yet it
// returns a *robotsPendingError due now, so that the request waits and is
// checked when it is about to start (fetch.go, recheckRobots), or, for a
// link of a queue run, when its entry is leased. A request pushed to a
// queue as admitted (a Visit during a queue run) would lose that wait (it
// is not stored), so its robots.txt is fetched at admission, pause or not.
func (c *Collector) robotsWhilePaused(req *Request) error {
	if !c.Paused() || c.shared.robots.known(req.URL) {
		return nil
	}
	if !req.entry.deferMark && !req.entry.onLease {
		if pr := req.parentRun; pr != nil && pr.queueMode {
			return nil
		}
		c.runMu.Lock()
		r := c.run
		c.runMu.Unlock()
		if r != nil && r.queueMode {
			return nil
		}
	}
	return &robotsPendingError{RobotsURL: robotsURLOf(req.URL).String(), Until: time.Now(), Err: errPausedRobots}
}

// AddSeed adds u to the running crawl as a start URL (not in Colly): a GET
// at depth 1, admitted as Visit admits it (scope, filters, robots.txt, the
// visited set, MaxRequests, blocked hosts), in every mode: an in-memory
// crawl, sync or async, queues it in its frontier, and a queue run pushes
// it to its queue, admitted. Unlike a sync Visit it never waits for the
// crawl. A refusal is returned, as Visit returns it, and delivered to
// OnRefused; ErrNoCrawl when no crawl runs (or it is ending), since a
// crawl that nobody waits for would never be stopped. Safe for concurrent
// use, from any goroutine; from a callback, use Request.Visit.
func (c *Collector) AddSeed(u string) error {
	c.runMu.Lock()
	r := c.run
	c.runMu.Unlock()
	if r == nil || r.aborted.Load() {
		return ErrNoCrawl
	}
	req, err := c.newRequest(u, http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		req.err = err
		c.refuse(req, err)
		return err
	}
	req.checkRevisit = true
	if r.cfg.recrawl != nil {
		c.recrawlVisit(r.cfg, req)
	}
	if err := c.enterRun(r, req); err != nil {
		req.err = err
		if !errors.Is(err, ErrNoCrawl) {
			c.refuse(req, err)
		}
		return err
	}
	return nil
}

// enterRun admits req and pushes it to r, the crawl that runs, as enter
// does, except that it never starts a crawl: when r has ended meanwhile,
// req is taken back and ErrNoCrawl returned.
func (c *Collector) enterRun(r *run, req *Request) error {
	if err := c.admit(req.stdContext(), r.cfg, req); err != nil {
		if endedByContext(req, err) {
			err = notStartedErr(req)
		}
		return err
	}
	c.runMu.Lock()
	if c.run != r || r.aborted.Load() {
		c.runMu.Unlock()
		c.unadmit(req)
		return ErrNoCrawl
	}
	var err error
	if r.queueMode {
		// A queue's push may wait for its storage: not under runMu. A
		// queue run that ended meanwhile refuses it (ErrStopped).
		c.runMu.Unlock()
		err = r.front.push(r.ctx, req, req.robotsWait)
	} else {
		// Under runMu, the run cannot be found idle and ended between
		// the check above and the push (waitRun).
		err = r.front.push(r.ctx, req, req.robotsWait)
		c.runMu.Unlock()
	}
	if err != nil {
		c.unadmit(req)
		return err
	}
	if !req.robotsWait.IsZero() {
		r.waits.begin(req, WaitRobots, 0, req.robotsWait)
	}
	return nil
}
