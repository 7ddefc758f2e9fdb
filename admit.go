package magpie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/storage"
)

// Admission: every way a request enters a crawl, in one file. The verbs:
//
//   - build: newRequest (and newRequestURL) make the Request.
//   - check: admit runs every check (URL, robots.txt, MaxRequests,
//     MaxRequestsPerHost, the visited set); unadmit undoes it.
//   - enqueue: enqueue puts an admitted request into the running crawl's
//     frontier, starting a crawl if none runs.
//
// enter is check then enqueue. Its callers are the doors: submit for a
// top-level call (c.Visit and its kin, Request.Do, Retry, VisitSitemap; in
// sync mode it waits for the crawl), submitChild for a link a callback found
// (Request.Visit and its kin; it never waits), and the sitemaps robots.txt
// names (sitemap.go). scrape, Colly's name, is build then submit. Every
// refusal goes through refuse or refuseMarked (refusals.go).

// scrape builds a request and submits it: the way in of c.Visit, c.Post,
// c.Head and c.Request.
func (c *Collector) scrape(u, method string, depth int, body io.Reader, ctx *Context, hdr http.Header, checkRevisit bool) error {
	req, err := c.newRequest(u, method, depth, body, ctx, hdr)
	if err != nil {
		req.err = err
		c.refuse(req, err)
		return err
	}
	req.checkRevisit = checkRevisit
	if cfg := c.config(); cfg.recrawl != nil && checkRevisit {
		c.recrawlVisit(cfg, req)
	}
	return c.submit(req)
}

// submit admits req and hands it to the running crawl. In sync mode, outside
// callbacks, it then waits for the crawl to finish.
func (c *Collector) submit(req *Request) error {
	cfg := c.config()
	if cfg.async {
		_, err := c.enter(cfg, req)
		if err != nil {
			c.refuseMarked(req, err)
		}
		return err
	}
	// Sync mode: a Visit from a callback must not wait for the crawl, and
	// the callbacks of its refusal run in the caller's region.
	nested := c.callingFromCallback()
	r, err := c.enter(cfg, req)
	if err != nil {
		if nested {
			req.regionGID.Store(c.heldToken())
			c.refuseMarked(req, err)
		} else {
			c.markCallbacksFor(req, func() { c.refuseMarked(req, err) })
		}
		return err
	}
	if nested {
		return nil
	}
	c.waitRun(r)
	return req.finalErr()
}

// submitChild admits a request made by Request.Visit and its kin, which never
// wait for the crawl. Such calls come from callbacks, in the region of the
// request they were made from, whose token they carry: this is the hot path
// of a crawl (every link of every page passes here).
func (c *Collector) submitChild(req *Request) error {
	// A link belongs to its parent's run: a queue run's storage takes it even
	// while the run stops, and it is admitted for good when leased.
	var cfg *config
	if req.parentRun != nil {
		cfg = req.parentRun.cfg
		req.entry.deferMark = req.parentRun.queueMode
	} else {
		cfg = c.config()
	}
	_, err := c.enter(cfg, req)
	if err != nil {
		if req.entry.deferMark && errors.Is(err, ErrStorageUnavailable) {
			// The outage reached OnError when it began, and the link is not
			// lost: its parent's entry goes back to the queue.
			c.logRefusal(req, err)
			return err
		}
		c.refuseMarked(req, err)
	}
	return err
}

// knownLink takes a link of parent's page the short way: it resolves,
// checks and keys the link once, with no recrawl, revisits allowed or queue
// run in the way and a visited set in memory, where looking a key up costs
// less than a Request. A link that passes goes on to admission; a refused
// one gets a Request only when something would see it (an OnRefused
// callback, the debug log). Most links of a crawl are already visited (each
// page is linked from many), so the common end of a link is a refusal at one
// allocation: the URL and the error share it. The link must be a GET
// without body or headers of its own (Request.Visit), and href something
// urlkey.ResolvePlain reads (it never has a fragment).
//
// knownLink runs admit's checks in admit's order and refuses the link with
// the error admit would give, counted under the same reason; a new link
// then goes through admission (admitLink) with the verdicts, the key and the
// robots.txt answer it carries, which admit does not compute again.
//
// done is false, and nothing was changed, for a link it cannot decide that
// way, which then goes the whole way through admission, with abs, href
// resolved, when knownLink got as far (nil otherwise). A concurrent
// admission of the same URL is decided by the visited set either way: the
// link is refused here only once its key is in it.
func (c *Collector) knownLink(parent *Request, href string, depth int) (abs *url.URL, done bool, err error) {
	r := parent.run
	if r == nil || r.queueMode || r.ctx.Err() != nil {
		return nil, false, nil
	}
	cfg := r.cfg
	if cfg.recrawl != nil || cfg.allowRevisit {
		return nil, false, nil
	}
	// Whether anything sees a refused link's Request: then it is built.
	heard := len(c.snapshotCallbacks().refused) > 0 || c.debugEnabled()
	st, ok := c.storage().(*storage.InMemoryStorage)
	if !ok {
		return nil, false, nil
	}
	base := parent.baseURL
	if base == nil {
		base = parent.URL
	}
	var u url.URL
	if base == nil || !urlkey.ResolvePlain(base, href, &u) {
		return nil, false, nil
	}
	slab, x := parent.linkSlot()
	x.url = u
	abs = &x.url
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if ctx.Err() != nil {
		return own(abs), false, nil
	}
	noteCheck(c, checkURLStep)
	if err := cfg.checkURL(abs, depth); err != nil {
		return c.refuseLink(parent, slab, abs, depth, heard, linkVerdict{}, err)
	}
	if err := c.checkBlocked(abs); err != nil {
		// Before robots.txt, which a blocked host must not be asked for.
		return c.refuseLink(parent, slab, abs, depth, heard, linkVerdict{}, err)
	}
	ua := cfg.userAgent
	if h := c.Headers; h != nil {
		ua = cfg.userAgentOf(*h)
	}
	wait, err := c.linkRobots(ctx, cfg, slab, abs, ua)
	if err != nil {
		return c.refuseLink(parent, slab, abs, depth, heard, linkVerdict{ua: ua}, err)
	}
	noteCheck(c, checkKeyStep)
	key := urlkey.Key(http.MethodGet, abs, cfg.sortQuery, nil)
	// Before the budget, as admit does once it is spent (overBudget).
	if seen, err := st.IsVisited(key); err == nil && seen {
		if heard {
			return nil, true, c.refuseLinkRequest(parent, slab, abs, depth, linkVerdict{key: key, ua: ua}, nil)
		}
		c.nextID.Add(1) // the ID the Request would have taken
		c.refusals.add(RefusedVisited)
		x.err.Destination = abs
		return abs, true, &x.err
	}
	// A spent MaxRequests is admit's to say first.
	if (cfg.maxRequests == 0 || c.requestCount.Load() < cfg.maxRequests) && c.hostSpent(cfg, abs) {
		return c.refuseLink(parent, slab, abs, depth, heard, linkVerdict{key: key, ua: ua}, ErrMaxRequestsPerHost)
	}
	return nil, true, c.admitLink(parent, slab, abs, depth, linkVerdict{key: key, ua: ua, wait: wait})
}

// refuseLink ends a link knownLink refused because of err, as admission
// would have: the same error, counted under the same reason, delivered with
// a Request built for it when something (heard) would see that, else
// without one. An error that is no plain refusal (the crawl stopping, say),
// or one that would reach OnError, goes the whole way instead.
func (c *Collector) refuseLink(parent *Request, slab *linkSlab, abs *url.URL, depth int, heard bool, v linkVerdict, err error) (*url.URL, bool, error) {
	reason := refusalReason(err)
	if reason == "" || c.Context != nil && c.Context.Err() != nil {
		return own(abs), false, nil
	}
	if heard {
		return nil, true, c.refuseLinkRequest(parent, slab, abs, depth, v, err)
	}
	c.nextID.Add(1) // the ID the Request would have taken
	c.refusals.add(reason)
	return nil, true, err
}

// refuseLinkRequest builds the Request of a link knownLink refused and
// hands it to the door submitChild hands a refused link to; a nil err
// means that the link is already visited.
func (c *Collector) refuseLinkRequest(parent *Request, slab *linkSlab, u *url.URL, depth int, v linkVerdict, err error) error {
	req := c.linkRequest(parent, slab, u, depth)
	if id := parent.regionGID.Load(); id != 0 {
		// Made by parent's callbacks: the refusal's callbacks run nested,
		// in their region.
		req.regionGID.Store(id)
		defer req.regionGID.Store(0)
	}
	req.visitKey, req.robotsUA = v.key, v.ua // what admit had set by then
	if err == nil {
		err = &AlreadyVisitedError{Destination: req.URL}
	}
	req.err = err
	c.refuseMarked(req, err)
	return err
}

// linkVerdict is what knownLink learnt of a new link: its visited key, the
// User-Agent its robots.txt was checked for and, when that robots.txt
// cannot be fetched now, the time the link waits until.
type linkVerdict struct {
	key  uint64
	ua   string
	wait time.Time
}

// admitLink builds the Request of a new link knownLink checked and submits
// it as childAt would, with the checks done (see admitChecks).
func (c *Collector) admitLink(parent *Request, slab *linkSlab, u *url.URL, depth int, v linkVerdict) error {
	req := c.linkRequest(parent, slab, u, depth)
	if id := parent.regionGID.Load(); id != 0 {
		// Made by parent's callbacks: a refusal's callbacks run nested, in
		// their region.
		req.regionGID.Store(id)
		defer req.regionGID.Store(0)
	}
	req.checked = checkedURL | checkedRobots | checkedKey
	req.visitKey, req.robotsUA, req.robotsWait = v.key, v.ua, v.wait
	return c.submitChild(req)
}

// linkRequest builds the Request of a link of parent's page, as childAt
// does.
func (c *Collector) linkRequest(parent *Request, slab *linkSlab, u *url.URL, depth int) *Request {
	req := c.newLinkRequest(u, depth, parent.Ctx.Clone())
	req.checkRevisit = true
	req.parentRun = parent.run
	req.parentURL = slab.parentURL(parent)
	req.pendingLink = true
	return req
}

// own copies a URL out of a linkSlab for a link that goes on to be
// admitted: its Request must not keep the page's slab alive while it waits.
func own(u *url.URL) *url.URL {
	n := *u
	return &n
}

// visitedLink is a link knownLink refused: its URL and its error, which
// Request.Visit returns, together.
type visitedLink struct {
	url url.URL
	err AlreadyVisitedError
}

// linkSlab holds the links of one page, so that a refused link costs no
// allocation of its own. Nothing is reused: an error a callback keeps stays
// valid (and keeps the slab alive). Callers of next may run at once (a
// callback's goroutines calling Visit): each slot is taken by one atomic
// add, and a full slab is replaced by whoever finds it full.
type linkSlab struct {
	n     atomic.Int32
	links []visitedLink
	// before is the number of links cut from the page's earlier slabs.
	before int

	// robots is the rules of the host the page's links last went to, for
	// their User-Agent (see linkRobots).
	robots atomic.Pointer[robotsMemo]
	// memo is the first robotsMemo made for the slab's links, written
	// once by whoever sets memoTaken, before robots points to it.
	memo      robotsMemo
	memoTaken atomic.Bool

	// mu guards parentOf and parent.
	mu sync.Mutex
	// parent is the page's URL as new links record it (Request.parentURL),
	// printed once per slab rather than once per link; parentOf is the URL
	// it was printed from.
	parentOf *url.URL
	parent   string
}

// next returns an unused slot of s, or nil when s is nil or full.
func (s *linkSlab) next() *visitedLink {
	if s == nil {
		return nil
	}
	if i := s.n.Add(1) - 1; int(i) < len(s.links) {
		return &s.links[i]
	}
	return nil
}

// parentURL is urlString(parent), printed once while parent.URL stays the
// same.
func (s *linkSlab) parentURL(parent *Request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parentOf == nil || s.parentOf != parent.URL {
		s.parentOf, s.parent = parent.URL, urlString(parent)
	}
	return s.parent
}

// linkSlot returns a slot of r's link slab, and the slab.
func (r *Request) linkSlot() (*linkSlab, *visitedLink) {
	slab := r.pageLinks.Load()
	if x := slab.next(); x != nil {
		return slab, x
	}
	// The first slab has room for as many links as the run's last page
	// had (the pages of a site are alike); later ones double the page's.
	size := minLinkSlab
	if run := r.run; run != nil {
		size = int(run.linkHint.Load())
	}
	next := &linkSlab{}
	if slab != nil {
		// What the page's links share goes on to the next slab.
		next.robots.Store(slab.robots.Load())
		slab.mu.Lock()
		next.parentOf, next.parent = slab.parentOf, slab.parent
		slab.mu.Unlock()
		next.before = slab.count()
		size = next.before
	}
	next.links = make([]visitedLink, min(max(size, minLinkSlab), maxLinkSlab))
	r.pageLinks.Store(next)
	return next, next.next()
}

// minLinkSlab and maxLinkSlab bound the links of one linkSlab.
const (
	minLinkSlab = 4
	maxLinkSlab = 256
)

// count is the number of links cut from s and the page's slabs before it.
func (s *linkSlab) count() int {
	return s.before + min(int(s.n.Load()), len(s.links))
}

// noteLinks records how many links req's page cut, the size of the next
// page's first slab.
func (r *run) noteLinks(req *Request) {
	if slab := req.pageLinks.Load(); slab != nil {
		r.linkHint.Store(int32(min(slab.count(), maxLinkSlab)))
	}
}

// Admission steps a test may count (see noteCheck).
const (
	checkURLStep    = "checkURL"
	checkRobotsStep = "robots"
	checkKeyStep    = "key"
)

// checkHook, set by tests only, is told of each check admission runs on a
// request or link, with its collector; it is nil in a crawl.
var checkHook atomic.Pointer[func(c *Collector, step string)]

// noteCheck tells checkHook of step.
func noteCheck(c *Collector, step string) {
	if h := checkHook.Load(); h != nil {
		(*h)(c, step)
	}
}

// newRequest builds a request; on error it still returns a request (with
// whatever could be parsed) so that OnError can be told which one failed.
func (c *Collector) newRequest(u, method string, depth int, body io.Reader, ctx *Context, hdr http.Header) (*Request, error) {
	p, err := urlkey.Parse(u)
	if err != nil {
		req, _ := c.newRequestURL(&url.URL{Path: u}, method, depth, nil, ctx, hdr)
		return req, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	return c.newRequestURL(p, method, depth, body, ctx, hdr)
}

// newRequestURL is newRequest for a parsed URL, which the request keeps.
func (c *Collector) newRequestURL(u *url.URL, method string, depth int, body io.Reader, ctx *Context, hdr http.Header) (*Request, error) {
	// The Request and the variable its Headers points to in one allocation.
	x := &struct {
		req Request
		hdr http.Header
	}{}
	return &x.req, c.initRequest(&x.req, &x.hdr, u, method, depth, body, ctx, hdr)
}

// newLinkRequest is newRequestURL for a link knownLink resolved: a GET
// with the collector's headers, its URL a copy of *u held in the same
// allocation as the Request.
func (c *Collector) newLinkRequest(u *url.URL, depth int, ctx *Context) *Request {
	x := &struct {
		req Request
		hdr http.Header
		url url.URL
	}{url: *u}
	_ = c.initRequest(&x.req, &x.hdr, &x.url, http.MethodGet, depth, nil, ctx, nil) // no body to read
	return &x.req
}

// initRequest fills req for newRequestURL; hp is where req.Headers points.
func (c *Collector) initRequest(req *Request, hp *http.Header, u *url.URL, method string, depth int, body io.Reader, ctx *Context, hdr http.Header) error {
	if ctx == nil {
		ctx = NewContext()
	}
	if hdr == nil {
		hdr = c.defaultHeaders()
	}
	*hp = hdr
	req.URL, req.Method, req.Headers, req.Ctx, req.Depth = u, method, hp, ctx, depth
	req.ID, req.collector, req.stdCtx, req.attempt = c.nextID.Add(1), c, c.Context, 1
	if h := hdr.Get("Host"); h != "" {
		req.Host = h
	}
	if body != nil {
		b, err := io.ReadAll(body)
		if err != nil {
			return fmt.Errorf("reading request body: %w", err)
		}
		req.bodyBytes = b
		req.Body = bytes.NewReader(b)
	}
	return nil
}

// enter admits req and queues it; on failure nothing of the admission is left
// and req.err holds the error.
//
// Once req's StdlibContext has ended, the crawl it would join is stopping:
// req is refused as stopped (notStartedErr), not admitted only to be
// dropped. A link found during a queue run is still pushed to the queue,
// for a later run (its page is acknowledged and will not find it again).
func (c *Collector) enter(cfg *config, req *Request) (*run, error) {
	if req.stdContext().Err() != nil && !req.entry.deferMark {
		req.err = notStartedErr(req)
		return nil, req.err
	}
	if err := c.admit(req.stdContext(), cfg, req); err != nil {
		if endedByContext(req, err) {
			err = notStartedErr(req) // it ended during the admission
		}
		req.err = err
		return nil, err
	}
	r, err := c.enqueue(req, req.robotsWait)
	if err != nil {
		c.unadmit(req)
		req.err = err
		return nil, err
	}
	if !req.robotsWait.IsZero() && r != nil {
		r.waits.begin(req, WaitRobots, 0, req.robotsWait)
	}
	return r, nil
}

// admit runs every check a request must pass before it may wait in the
// frontier. When it returns nil the request holds a MaxRequests slot and
// one of its host's MaxRequestsPerHost slots (when a budget applies to the
// host) and, unless it bypasses the visited check, is marked visited.
//
// Its Priority is decided last (see decidePriority).
//
// A request with deferMark set (a link found during a queue run) takes
// none: it is only checked against the visited set and a spent host
// budget, and gets its slots and its mark when its queue entry is leased.
// Marking at discovery would open a window — mark written, entry not yet
// pushed — in which a crash loses the page; marking at lease time leaves
// only duplicates in the queue, which the lease refuses.
//
// The checks knownLink ran on a link already (req.checked) are not run
// again: their verdicts were that the link passes.
func (c *Collector) admit(ctx context.Context, cfg *config, req *Request) error {
	done := req.checked
	req.checked = 0
	if done&checkedURL == 0 {
		noteCheck(c, checkURLStep)
		if err := cfg.checkURL(req.URL, req.Depth); err != nil {
			return err
		}
	}
	if err := c.checkBlocked(req.URL); err != nil {
		return err
	}
	c.shared.creds.noteStart(req)
	if done&checkedRobots == 0 && req.Method != "HEAD" && isWeb(req.URL) {
		noteCheck(c, checkRobotsStep)
		req.robotsUA = cfg.userAgentOf(*req.Headers)
		err := c.robotsWhilePaused(req)
		if err == nil {
			err = c.checkRobots(ctx, cfg, req.URL, req.robotsUA)
		}
		if err != nil {
			var pending *robotsPendingError
			var down *hostDownError
			switch {
			case errors.As(err, &pending):
				// robots.txt is unreachable for now: the request waits in
				// the frontier (holding no worker) and is checked again
				// when it is due (see fetch).
				req.robotsWait = pending.Until
			case errors.As(err, &down):
				// The host cannot be reached: not a refusal. The request
				// goes on, is checked again before it is sent, and fails
				// to OnError if the host is still down (see fetch).
				req.robotsWait = time.Now()
			default:
				return err
			}
		}
	}
	if done&checkedKey == 0 {
		noteCheck(c, checkKeyStep)
		req.visitKey = urlkey.Key(req.Method, req.URL, cfg.sortQuery, req.bodyBytes)
	}
	if req.entry.deferMark {
		if req.checkRevisit && !cfg.allowRevisit && !req.batchingLinks() {
			// This check only saves queue space; the lease checks for good.
			// A link batched with its page's other links is checked when
			// the batch is stored, in the same round trip as the push.
			// A failing visited set must not refuse the link (its parent's
			// entry is acknowledged, so nothing would find it again): it is
			// queued, at worst as a duplicate the lease refuses.
			seen, err := c.storage().IsVisited(req.visitKey)
			if err == nil && seen {
				return &AlreadyVisitedError{Destination: req.URL}
			}
			if err != nil && c.debugEnabled() {
				c.logger.Debug("visited check failed; queueing the link anyway", "url", req.URL.Redacted(), "err", err)
			}
		}
		if c.hostSpent(cfg, req.URL) {
			// Not stored only to be refused when leased: a crawl trap's
			// links must not fill the queue.
			return ErrMaxRequestsPerHost
		}
		// Decided before the push, which stores it with the entry.
		return c.decidePriority(cfg, req)
	}
	// A redelivered queue entry took its slots on its first delivery.
	slot := !req.entry.redelivered
	if slot && !c.reserveSlot(cfg) {
		return c.overBudget(cfg, req, ErrMaxRequests)
	}
	if slot && !c.reserveHost(cfg, req) {
		c.releaseSlot()
		return c.overBudget(cfg, req, ErrMaxRequestsPerHost)
	}
	if req.checkRevisit && !cfg.allowRevisit {
		var added bool
		var err error
		if req.entry.premark == premarkAdded || req.entry.premark == premarkSeen {
			// Marked with the rest of its queue Lease batch.
			added = req.entry.premark == premarkAdded
		} else {
			added, err = c.markVisited(ctx, req.visitKey)
		}
		req.entry.premark = 0
		if err == nil && !added && !req.entry.ownsMark {
			err = &AlreadyVisitedError{Destination: req.URL}
		} else if err != nil {
			err = &StorageError{Op: "visited", Err: err}
		}
		if err != nil {
			if slot {
				c.releaseSlot()
				c.releaseHost(req)
			}
			return err
		}
		req.marked = true
	}
	// Last, so that the hook sees only requests admitted; a refusal gives
	// back what the checks took.
	if err := c.decidePriority(cfg, req); err != nil {
		if slot {
			c.releaseSlot()
			c.releaseHost(req)
		}
		c.forgetVisited(req)
		return err
	}
	return nil
}

// checkURL applies the checks that need only the URL and depth: scheme,
// depth, URL filters and domain filters. Redirect hops run it too.
func (cfg *config) checkURL(u *url.URL, depth int) error {
	web := isWeb(u)
	if !web && (u.Scheme == "" || cfg.otherScheme == nil || !cfg.otherScheme(u.Scheme)) {
		return fmt.Errorf("%w: scheme %q in %q", ErrUnsupportedScheme, u.Scheme, u.Redacted())
	}
	hostname := u.Hostname()
	if hostname == "" && web {
		return fmt.Errorf("%w: no host in %q", ErrMissingURL, u.Redacted())
	}
	if cfg.maxDepth > 0 && depth > cfg.maxDepth {
		return ErrMaxDepth
	}
	if len(cfg.disallowedURLs) > 0 || len(cfg.urlFilters) > 0 {
		s := u.String()
		for _, re := range cfg.disallowedURLs {
			if re.MatchString(s) {
				return ErrForbiddenURL
			}
		}
		if len(cfg.urlFilters) > 0 && !slices.ContainsFunc(cfg.urlFilters, func(re *regexp.Regexp) bool { return re.MatchString(s) }) {
			return ErrNoURLFiltersMatch
		}
	}
	if hostname == "" {
		return nil // a file:// URL: domain filters are about servers
	}
	host := asciiHost(hostname)
	if cfg.disallowedDomains.has(host) {
		return ErrForbiddenDomain
	}
	if !cfg.allowedDomains.empty() && !cfg.allowedDomains.has(host) {
		return ErrForbiddenDomain
	}
	return nil
}

// isWeb reports whether u is an http or https URL, to which robots.txt and
// host limits apply.
func isWeb(u *url.URL) bool { return u.Scheme == "http" || u.Scheme == "https" }

// userAgentOf is the User-Agent a request is sent with.
func (cfg *config) userAgentOf(h map[string][]string) string {
	if v, ok := h["User-Agent"]; ok {
		if len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return cfg.userAgent
}

// checkRobots refuses u when robots.txt forbids it for userAgent, and hands
// the host's Crawl-delay to the limiter.
func (c *Collector) checkRobots(ctx context.Context, cfg *config, u *url.URL, userAgent string) error {
	return c.checkRobotsFresh(ctx, cfg, u, userAgent, false)
}

// checkRobotsFresh is checkRobots; fresh asks a host known to be down again
// (robotsCache.recheck).
func (c *Collector) checkRobotsFresh(ctx context.Context, cfg *config, u *url.URL, userAgent string, fresh bool) error {
	if cfg.ignoreRobots || !isWeb(u) {
		return nil
	}
	check := c.shared.robots.check
	if fresh {
		check = c.shared.robots.recheck
	}
	allowed, delay, err := check(ctx, u, userAgent)
	if err != nil {
		var pending *robotsPendingError
		var down *hostDownError
		if ctx.Err() != nil || errors.As(err, &pending) || errors.As(err, &down) ||
			errors.Is(err, ErrRobotsTxtUnavailable) || errors.Is(err, ErrPrivateNetwork) {
			// Stopping (not the host failing), or the cache's own verdict.
			return err
		}
		return fmt.Errorf("%w: robots.txt of %s: %w", ErrRobotsTxtUnavailable, u.Host, err)
	}
	if delay > 0 {
		c.shared.limiter.SetCrawlDelay(u.Host, delay)
	}
	if !allowed {
		return ErrRobotsTxtBlocked
	}
	return nil
}

// reserveSlot takes one of MaxRequests slots with a CAS loop, so that the
// limit holds exactly however many goroutines admit at once.
func (c *Collector) reserveSlot(cfg *config) bool {
	for {
		n := c.requestCount.Load()
		if cfg.maxRequests > 0 && n >= cfg.maxRequests {
			return false
		}
		if c.requestCount.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *Collector) releaseSlot() { c.requestCount.Add(^uint32(0)) }

// hostBudgets counts the requests admitted to each host that has a
// MaxRequestsPerHost budget: one entry per such host seen, for the
// collector's life.
type hostBudgets struct {
	// mu guards n.
	mu sync.Mutex
	n  map[string]int
}

// budgetKey is the host u's requests are counted under: host:port as
// url.URL.Host has it (the politeness gate's key), lower-cased and without
// the scheme's default port, so that a link written http://h:80/ is counted
// with http://h/. "" for a URL without a host, to which limits do not
// apply.
func budgetKey(u *url.URL) string {
	if u == nil {
		return ""
	}
	h := u.Host
	switch {
	case u.Scheme == "http" && strings.HasSuffix(h, ":80"):
		h = h[:len(h)-3]
	case u.Scheme == "https" && strings.HasSuffix(h, ":443"):
		h = h[:len(h)-4]
	}
	if strings.ContainsFunc(h, unicode.IsUpper) {
		h = strings.ToLower(h)
	}
	return h
}

// hostBudget is the budget of u's host, and the key it is counted under
// (budgetKey): the first matching LimitRule's MaxRequestsPerHost, else the
// collector's; 0 for none.
func (c *Collector) hostBudget(cfg *config, u *url.URL) (limit int, key string) {
	if cfg.maxPerHost <= 0 && !c.shared.limiter.HasBudgets() {
		return 0, ""
	}
	key = budgetKey(u)
	if key == "" {
		return 0, ""
	}
	if n := c.shared.limiter.HostBudget(u.Host); n > 0 {
		return n, key
	}
	return max(cfg.maxPerHost, 0), key
}

// hostSpent reports whether u's host has had all the requests its budget
// allows.
func (c *Collector) hostSpent(cfg *config, u *url.URL) bool {
	limit, key := c.hostBudget(cfg, u)
	if limit == 0 {
		return false
	}
	b := &c.budgets
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[key] >= limit
}

// reserveHost takes one of the budget slots of req's host, which req then
// holds (hostSlot) until releaseHost; it reports false when none is left.
// A host without a budget needs none.
func (c *Collector) reserveHost(cfg *config, req *Request) bool {
	limit, key := c.hostBudget(cfg, req.URL)
	if limit == 0 {
		return true
	}
	b := &c.budgets
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[key] >= limit {
		return false
	}
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[key]++
	req.hostSlot = true
	return true
}

// releaseHost gives back the budget slot req holds, if any.
func (c *Collector) releaseHost(req *Request) {
	if !req.hostSlot {
		return
	}
	req.hostSlot = false
	b := &c.budgets
	b.mu.Lock()
	b.n[budgetKey(req.URL)]--
	b.mu.Unlock()
}

// overBudget is the refusal of req, which found no slot left of a budget
// (MaxRequests, or MaxRequestsPerHost): over (ErrMaxRequests or
// ErrMaxRequestsPerHost), unless req is already visited, as a link back to
// a page fetched is. So Stats().Refused and OnRefused count the pages the
// budget kept out, not the links to those it let in. A queue entry whose
// visited mark its Lease batch set (premark) is no link back: its own mark
// is no visit, and the entry stays over the budget (queued for a later run,
// for MaxRequests).
func (c *Collector) overBudget(cfg *config, req *Request, over error) error {
	if !req.checkRevisit || cfg.allowRevisit || req.entry.ownsMark {
		return over
	}
	switch req.entry.premark {
	case premarkSeen:
		return &AlreadyVisitedError{Destination: req.URL}
	case premarkAdded, premarkUnknown:
		return over
	}
	if seen, err := c.storage().IsVisited(req.visitKey); err == nil && seen {
		return &AlreadyVisitedError{Destination: req.URL}
	}
	return over
}

// markVisited adds key to the visited set in one atomic step and reports
// whether this call added it.
func (c *Collector) markVisited(ctx context.Context, key uint64) (bool, error) {
	st := c.storage()
	if ms, ok := st.(*storage.InMemoryStorage); ok {
		// Called on its type, the key's slice stays on the stack; through
		// the interface it would be an allocation per request.
		added, err := ms.AddVisited(ctx, key)
		if err != nil {
			return false, err
		}
		return len(added) == 1 && added[0], nil
	}
	if vs, ok := st.(storage.VisitedSet); ok {
		added, err := vs.AddVisited(ctx, key)
		if err != nil {
			return false, err
		}
		return len(added) == 1 && added[0], nil
	}
	// A Colly-style store has only IsVisited and Visited: serialise the pair
	// in-process, which is exact for one process.
	c.visitMu.Lock()
	defer c.visitMu.Unlock()
	seen, err := st.IsVisited(key)
	if err != nil || seen {
		return false, err
	}
	return true, st.Visited(key)
}

// enqueue puts an admitted request into the running crawl, starting one if
// none runs.
//
// A request made from a callback goes to its parent's run: a queue run's
// storage takes it even while the run stops (the parent is acknowledged and
// will not rediscover it); a stopped in-memory run refuses it with
// ErrStopped rather than starting a crawl nobody waits for.
func (c *Collector) enqueue(req *Request, notBefore time.Time) (*run, error) {
	if pr := req.parentRun; pr != nil {
		if pr.queueMode {
			if req.entry.parent != nil && req.entry.parent.finished.Load() && pr.ctx.Err() != nil {
				// A callback abandoned as stuck came back after its
				// run stopped: its page was released, not acknowledged,
				// and finds the link again when fetched again.
				return nil, ErrStopped
			}
			return pr, pr.front.push(pr.ctx, req, notBefore)
		}
		c.runMu.Lock()
		if c.run == pr {
			defer c.runMu.Unlock()
			return pr, pr.front.push(pr.ctx, req, notBefore)
		}
		if pr.aborted.Load() {
			c.runMu.Unlock()
			return nil, ErrStopped
		}
		// The parent's crawl finished on its own, so no callback of it runs:
		// this Visit comes from user code holding on to an old request, and
		// starts (or joins) a crawl like c.Visit.
		c.runMu.Unlock()
	}
	c.runMu.Lock()
	r := c.run
	if r == nil {
		var err error
		cfg := c.snapshot()
		f := newMemFrontier(pendingBound(cfg.maxPending))
		f.ranked = cfg.ranked()
		r, err = c.startRun(cfg, f, cfg.workers, false)
		if err != nil {
			c.runMu.Unlock()
			return nil, err
		}
		c.run = r
	}
	if r.queueMode {
		c.runMu.Unlock()
		return r, r.front.push(r.ctx, req, notBefore)
	}
	// The in-memory push is quick and never blocks; doing it under runMu
	// means a run is never stopped between "found running" and "pushed".
	defer c.runMu.Unlock()
	return r, r.front.push(r.ctx, req, notBefore)
}

// unadmit undoes admit for a request that could not be queued after all.
func (c *Collector) unadmit(req *Request) {
	if req.entry.deferMark {
		return // it took no slot and no mark
	}
	c.releaseSlot()
	c.releaseHost(req)
	c.forgetVisited(req)
}

// forgetVisited removes a failed request's visited mark so that it may be
// tried again later.
func (c *Collector) forgetVisited(req *Request) {
	if !req.marked {
		return
	}
	req.marked = false
	keys := append([]uint64{req.visitKey}, req.redirectKeys...)
	req.redirectKeys = nil
	if vs, ok := c.storage().(storage.VisitedSet); ok {
		if err := vs.RemoveVisited(context.Background(), keys...); err != nil {
			c.logger.Warn("forgetting a failed request", "url", req.URL.Redacted(), "err", err)
		}
	}
}
