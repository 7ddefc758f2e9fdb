package magpie

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// flight is a request's bookkeeping for one flight through the engine, as
// net/http keeps a connection's state in its transport's persistConn rather
// than on http.Request: which run it belongs to, its tries, its visited
// marks, its host's turn, its sitemap, the callbacks running for it and, in
// a queue run, its queue entry. Callbacks never see it.
//
// Request embeds it, so the engine reads r.attempt for
// r.flight.flightTries.attempt; each concern is a struct of its own below.
// A request the in-memory frontier keeps compact (frontier_pending.go) has
// none of it set but its visited state.
type flight struct {
	// run is the run this request is part of, set when it leaves the frontier.
	run *run
	// parentRun is the run of the request this one was made from in a callback.
	parentRun *run
	// pendingLink is set on a link made by a callback (childAt): nobody
	// holds it once it is queued, so the in-memory frontier may keep it in
	// a compact form and build a new Request when it leaves.
	pendingLink bool
	// prioritized is set once admission decided Request.Priority (see
	// Collector.decidePriority), and on a retry copy, which keeps it: the
	// crawl order and the Prioritize hook apply once per request.
	prioritized bool

	flightTries
	flightVisit
	flightHost
	flightSitemap
	flightCallbacks

	// entry is the request's queue bookkeeping, used in queue runs only.
	entry queueEntry
}

// flightTries is the retry concern: which try this is, when it may start,
// the request the tries were copied from, and the final outcome.
type flightTries struct {
	// attempt counts tries of this request, starting at 1.
	attempt int
	// notBefore delays a retried request.
	notBefore time.Time
	// root is the request a retry copy was made from, which a sync Visit
	// reads its final error from.
	root *Request
	// err is the request's final error, set before its completion is counted.
	// Once the request is in flight, finish writes it through setFinal, as
	// retry copies finish on other goroutines and write their root's err.
	err error
	// finalMu guards err and finalAttempt once the request is in flight.
	finalMu sync.Mutex
	// finalAttempt is the attempt whose outcome err holds.
	finalAttempt int
}

// flightVisit is the visited-set concern.
type flightVisit struct {
	// visitKey is the visited-set key; zero until admitted.
	visitKey uint64
	// checkRevisit is false for Retry and when AllowURLRevisit applies.
	checkRevisit bool
	// marked is true while this request holds a visited mark it made.
	marked bool
	// checked names the checks knownLink ran on this link before its
	// Request was built, all passed, which admit then skips (and clears).
	checked admitChecks
	// redirectKeys are visited marks made for redirect targets.
	redirectKeys []uint64
}

// flightHost is the host's-turn concern: robots.txt and the limiter.
type flightHost struct {
	// ticket is the request's limiter claim, set when it leaves the gate.
	ticket *limits.Ticket
	// robotsWait, when set, is when the host's unreachable robots.txt will
	// be fetched again: the request waits until then and is checked again
	// before it is sent.
	robotsWait time.Time
	// robotsUA is the User-Agent robots.txt was checked for at admission.
	robotsUA string
	// hostSlot is set while the request holds one of its host's
	// MaxRequestsPerHost slots that admission would give back (see
	// Collector.reserveHost).
	hostSlot bool
	// unresolved is set when the gate could not key the host by its
	// address (PolitenessIP): the lookup's error, which the fetch fails
	// with.
	unresolved error
}

// flightSitemap is the sitemap concern.
type flightSitemap struct {
	// sitemap marks a sitemap (or sitemap index) document: its response is
	// read for URLs instead of going to the callbacks.
	sitemap bool
	// sitemapLevel is how many sitemap indexes stand above this sitemap
	// document (0 for one given to VisitSitemap or named by robots.txt);
	// see MaxSitemapNesting.
	sitemapLevel int
	// sitemapFor, on a sitemap named by a robots.txt, is that robots.txt's
	// origin: the sitemap may list URLs there too (sitemaps.org
	// cross-submission). Nested sitemaps inherit it.
	sitemapFor string
}

// flightCallbacks is the concern of the callbacks running for the request.
type flightCallbacks struct {
	// running names the callback this request's stage work is in (see
	// safelyAt), for the report of a callback that never returns.
	running atomic.Pointer[callbackLabel]
	// regionGID is the token of the region running this request's callbacks
	// while they run (see markCallbacksFor), copied to the requests they make
	// while those are submitted, so that the sync-mode turn knows a nested
	// callback (see callbackMarks).
	regionGID atomic.Uint64
	// finished is set by the first finish of the request: a stage that
	// abandoned a stuck callback and the callback's late return cannot both
	// finish it.
	finished atomic.Bool
	// pageLinks is where knownLink cuts the links of this request's page
	// from (see linkSlab).
	pageLinks atomic.Pointer[linkSlab]
}

// admitChecks is a set of admission checks a link passed before its Request
// was built (flightVisit.checked).
type admitChecks uint8

const (
	// checkedURL: config.checkURL passed, at the request's depth.
	checkedURL admitChecks = 1 << iota
	// checkedRobots: robots.txt was checked for robotsUA; robotsWait is set
	// when it could not be fetched.
	checkedRobots
	// checkedKey: visitKey holds the request's visited key.
	checkedKey
)

// setFinal records the outcome of attempt: the latest attempt wins, whichever
// goroutine finishes first (a Retry from OnResponse finishes the copy and the
// original concurrently).
func (t *flightTries) setFinal(attempt int, err error) {
	t.finalMu.Lock()
	defer t.finalMu.Unlock()
	if attempt >= t.finalAttempt {
		t.err = err
		t.finalAttempt = attempt
	}
}

// finalErr is the error setFinal recorded.
func (t *flightTries) finalErr() error {
	t.finalMu.Lock()
	defer t.finalMu.Unlock()
	return t.err
}
