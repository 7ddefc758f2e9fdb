package magpie

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/storage"
)

// Recrawling: a crawl run again over the store of an earlier one fetches
// only what is due, asks the server whether each page changed, and tells
// what did. The pieces, in the order a page meets them:
//
//   - enter: a top-level Visit (or MarkDue before a queue's AddURL) takes
//     the URL's visited mark off when it was fetched before this
//     Collector's session; the first one also queues every due page of the
//     store (DueURLs). A link to a page that is not due is refused as
//     visited, counted as RefusedNotDue (recrawlRefusal, in the one door).
//   - send: conditional adds If-None-Match / If-Modified-Since from the
//     stored state (fetch.go's conditional step).
//   - answer: recrawlOutcome judges the answer (304, digest, 404/410),
//     sets Response.Change, counts it and stores the page's new state and
//     schedule (adaptive, as Nutch's AdaptiveFetchSchedule).

// Change is what a recrawl found at a URL: its zero value ChangeNone means
// the response is not a recrawl's judgement (recrawling is off, the store
// cannot keep page state, or the answer was an error that says nothing of
// the page, such as a 503). It prints and marshals as its name.
type Change uint8

// The outcomes of a fetch in recrawl mode.
const (
	// ChangeNone is no judgement (see Change).
	ChangeNone Change = iota
	// ChangeNew is a URL's first 2xx answer: its first fetch, or the first
	// success of a URL that had only failed before (a 404 since its first
	// fetch, say).
	ChangeNew
	// ChangeChanged is a body whose digest differs from the stored one, or
	// a page answering again after it was gone.
	ChangeChanged
	// ChangeUnchanged is a 304 Not Modified to a conditional request (no
	// body was downloaded), or a body whose digest equals the stored one.
	ChangeUnchanged
	// ChangeGone is a 404 or 410 for a URL that answered 2xx before. Its
	// state is kept and its revisits back off. A URL that never answered
	// 2xx (a broken link, 404 at every fetch) is a failure each time, with
	// ChangeNone, not gone.
	ChangeGone
)

var changeNames = [...]string{"", "new", "changed", "unchanged", "gone"}

// String returns "new", "changed", "unchanged", "gone", or "" for ChangeNone.
func (ch Change) String() string {
	if int(ch) < len(changeNames) {
		return changeNames[ch]
	}
	return fmt.Sprintf("Change(%d)", uint8(ch))
}

// MarshalText implements encoding.TextMarshaler, so items carrying a Change
// serialise as its name.
func (ch Change) MarshalText() ([]byte, error) { return []byte(ch.String()), nil }

// RecrawlPolicy sets how Recrawl schedules revisits. The zero value revisits
// every known page on every run (MinInterval 0), conditionally, with
// intervals up to DefaultMaxRevisitInterval. Recrawl copies it.
type RecrawlPolicy struct {
	// MinInterval is the shortest time between two fetches of a page, and
	// the first interval of a page fetched for the first time. 0 makes
	// every page due again at the next run.
	MinInterval time.Duration
	// MaxInterval is the longest interval (0: DefaultMaxRevisitInterval).
	MaxInterval time.Duration
	// Refetch sends no validators: every revisit downloads the body, and
	// changes are judged by digest alone.
	Refetch bool
}

// DefaultMaxRevisitInterval is RecrawlPolicy.MaxInterval when left 0.
const DefaultMaxRevisitInterval = 90 * 24 * time.Hour

// The adaptive schedule's rates (Nutch's AdaptiveFetchSchedule defaults):
// an unchanged page's interval grows by 40%, a changed page's shrinks by
// 20%, a gone page's doubles.
const (
	revisitGrow   = 1.4
	revisitShrink = 0.8
	revisitGone   = 2.0
)

// ErrRecrawlUnsupported is returned by DueURLs and MarkDue when recrawling
// is off (no Recrawl option) or the storage keeps no page state (it does
// not implement storage.PageStore, as a Colly storage does not).
var ErrRecrawlUnsupported = errors.New("magpie: recrawl needs the Recrawl option and a storage.PageStore")

// ErrNotDue is returned (wrapped, beside *AlreadyVisitedError, so that
// errors.As finds that too) when a link to a page an earlier crawl fetched,
// and that is not due again yet, is refused; OnRefused hears of it and
// Stats.Refused[RefusedNotDue] counts it.
var ErrNotDue = errors.New("not due for a revisit")

// RefusedNotDue is the Stats.Refused reason of links to pages that are not
// due for a revisit.
const RefusedNotDue = "not_due"

// Recrawl turns on recrawl mode: the Collector's storage (which must
// implement storage.PageStore: the default memory store, sqlitestore and
// redisstore do) remembers, per URL, the last answer's validators, a body
// digest and a revisit schedule, and a crawl over a store that holds an
// earlier crawl fetches again only what is due, plus the start URLs, plus
// new links. Revisits are conditional requests; Response.Change (and
// Item.Change, and Stats.Recrawl) tells new, changed, unchanged and gone
// pages apart. A 304 answer is a success: OnResponse and OnScraped run with
// an empty Body and Change == ChangeUnchanged. A 404 or 410 for a page
// that answered 2xx before goes to OnError with Change == ChangeGone; one
// for a URL that never did is a failure with ChangeNone. A URL whose first
// fetch the server failed (5xx, 408, 429, or a 304 to a request with no
// validator) is kept too, so that the next recrawl tries it again. A page
// queued from the store keeps the depth it was last fetched at.
//
// The first top-level Visit of the Collector queues every due page of the
// store; a queue run calls DueURLs and MarkDue itself. A session is the
// Collector's life: a page fetched since NewCollector is not fetched again
// by it. Politeness, robots.txt and every other admission check apply to
// revisits as to any request.
func Recrawl(p RecrawlPolicy) CollectorOption {
	return func(c *Collector) {
		if p.MaxInterval <= 0 {
			p.MaxInterval = DefaultMaxRevisitInterval
		}
		p.MinInterval = max(p.MinInterval, 0)
		p.MaxInterval = max(p.MaxInterval, p.MinInterval)
		c.settings.recrawl = &recrawler{policy: p, since: time.Now()}
	}
}

// recrawler is a Collector's recrawl session, shared with its clones.
type recrawler struct {
	policy RecrawlPolicy
	// since is when the session began: pages fetched before it are the
	// earlier crawl's.
	since time.Time
	// dueOnce queues the due pages at the first top-level Visit.
	dueOnce sync.Once
	// released holds the keys whose visited marks this session took off,
	// so that a page is made due once per session however many ways
	// (DueURLs, MarkDue, a start URL, a sitemap) name it.
	released sync.Map
	// starts holds the keys of this session's start URLs (a top-level
	// Visit, MarkDue): they are at depth 1, whatever depth their stored
	// state says (see keepDepth).
	starts sync.Map
	// counts are Stats.Recrawl's, by Change.
	counts [len(changeNames)]atomic.Uint64
	// heldMu guards held: the page states of a queue run's leased entries,
	// by lease ID, stored when their entries are acknowledged (ackWith) and
	// dropped when they are released.
	heldMu sync.Mutex
	held   map[string]storage.Page
}

// RecrawlStats counts the pages of recrawl mode by Change, since the
// Collector was made (Stats.Recrawl is a snapshot; all zero without
// Recrawl). A page fetched again after a crash or a Stop is counted again.
type RecrawlStats struct {
	// New, Changed, Unchanged and Gone count fetches by their Change.
	New       uint64 `json:"new"`
	Changed   uint64 `json:"changed"`
	Unchanged uint64 `json:"unchanged"`
	Gone      uint64 `json:"gone"`
}

func (c *Collector) recrawlStats() RecrawlStats {
	rc := c.config().recrawl
	if rc == nil {
		return RecrawlStats{}
	}
	return RecrawlStats{New: rc.counts[ChangeNew].Load(), Changed: rc.counts[ChangeChanged].Load(),
		Unchanged: rc.counts[ChangeUnchanged].Load(), Gone: rc.counts[ChangeGone].Load()}
}

// pageStore returns the recrawl session and the store's page state, or
// false when recrawling is off or the store keeps none.
func (c *Collector) pageStore(cfg *config) (*recrawler, storage.PageStore, bool) {
	if cfg.recrawl == nil {
		return nil, nil, false
	}
	ps, ok := c.storage().(storage.PageStore)
	return cfg.recrawl, ps, ok
}

// DueURLs yields the URLs of the store's pages that are due for a revisit
// and were not fetched in this session, and takes each one's visited mark
// off as it is yielded, so that Visit or a queue's AddURL of it is admitted:
// a queue run adds them to its queue before Run (a Visit does so by itself).
// Stopping the loop early leaves the rest as they are. It fails (yields one
// error and stops) with ErrRecrawlUnsupported without Recrawl or a
// storage.PageStore, or with the store's error. Safe for concurrent use; a
// URL is yielded once per session however often it is called.
func (c *Collector) DueURLs(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		rc, ps, ok := c.pageStore(c.config())
		if !ok {
			yield("", ErrRecrawlUnsupported)
			return
		}
		now := time.Now()
		before := now
		if rc.policy.MinInterval == 0 {
			// Every known page is due, whatever its schedule said.
			before = time.UnixMilli(1<<62 - 1)
		}
		for p, err := range ps.DuePages(ctx, before) {
			if err != nil {
				yield("", err)
				return
			}
			if !p.State.Fetched.Before(rc.since) || p.State.URL == "" || p.State.Fetched.Add(rc.policy.MinInterval).After(now) {
				continue
			}
			if released, err := c.releaseVisited(ctx, rc, p.ID); err != nil {
				yield("", err)
				return
			} else if !released {
				continue
			}
			if !yield(p.State.URL, nil) {
				return
			}
		}
	}
}

// MarkDue makes u due now when an earlier crawl fetched it: its visited
// mark is taken off, so the next Visit or queue AddURL of u fetches it
// again (conditionally). A URL fetched in this session, or never fetched,
// is left as it is. u is taken for a start URL: fetched at depth 1, not at
// the depth its stored state has (call it for start URLs that DueURLs
// yielded too). It fails with ErrRecrawlUnsupported without Recrawl or a
// storage.PageStore, and with ErrInvalidURL for a URL that does not parse.
func (c *Collector) MarkDue(u string) error {
	cfg := c.config()
	if _, _, ok := c.pageStore(cfg); !ok {
		return ErrRecrawlUnsupported
	}
	p, err := urlkey.Parse(u)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	key := urlkey.RequestKey(http.MethodGet, urlkey.Canonical(p, cfg.sortQuery), nil)
	cfg.recrawl.starts.Store(key, struct{}{})
	_, err = c.markDueKey(c.storeContext(), cfg, key, time.Time{})
	return err
}

// markDueKey releases key's visited mark when its page was fetched before
// this session, or before newer (a sitemap's lastmod) when that is set, and
// reports whether this call released it.
func (c *Collector) markDueKey(ctx context.Context, cfg *config, key uint64, newer time.Time) (bool, error) {
	rc, ps, ok := c.pageStore(cfg)
	if !ok {
		return false, ErrRecrawlUnsupported
	}
	states, found, err := ps.GetPages(ctx, key)
	if err != nil {
		return false, &StorageError{Op: "page state", Err: err}
	}
	if !found[0] {
		return false, nil
	}
	fetched := states[0].Fetched
	if newer.IsZero() && !fetched.Before(rc.since) || !newer.IsZero() && !newer.After(fetched) {
		return false, nil
	}
	return c.releaseVisited(ctx, rc, key)
}

// releaseVisited takes key's visited mark off, unless this session did so
// already, and reports whether it did.
func (c *Collector) releaseVisited(ctx context.Context, rc *recrawler, key uint64) (bool, error) {
	vs, ok := c.storage().(storage.VisitedSet)
	if !ok {
		return false, ErrRecrawlUnsupported
	}
	if _, done := rc.released.LoadOrStore(key, struct{}{}); done {
		return false, nil
	}
	if err := vs.RemoveVisited(ctx, key); err != nil {
		rc.released.Delete(key)
		return false, &StorageError{Op: "visited", Err: err}
	}
	return true, nil
}

// recrawlVisit prepares a top-level GET in recrawl mode: the first one
// queues the store's due pages, and req's own page is made due if an
// earlier crawl fetched it (a start URL is always revisited). Failures are
// logged; req goes on and meets the visited check as usual.
func (c *Collector) recrawlVisit(cfg *config, req *Request) {
	rc, _, ok := c.pageStore(cfg)
	if !ok || req.Method != http.MethodGet {
		return
	}
	ctx := req.stdContext()
	key := urlkey.RequestKey(req.Method, urlkey.Canonical(req.URL, cfg.sortQuery), req.bodyBytes)
	rc.starts.Store(key, struct{}{})
	released, err := c.markDueKey(ctx, cfg, key, time.Time{})
	if err != nil {
		c.logger.Warn("recrawl: making a start URL due", "url", req.URL.Redacted(), "err", err)
	}
	if released {
		// The start URL takes its mark before the due pages are queued:
		// their links to it, found while it waits, are then refused as
		// visited instead of admitting it first and refusing the Visit.
		if _, err := c.markVisited(ctx, key); err == nil {
			req.entry.ownsMark = true
		}
	}
	rc.dueOnce.Do(func() { c.visitDue(ctx, cfg) })
}

// visitDue queues every due page of the store into the crawl, without
// waiting for it (the top-level Visit that called it waits).
func (c *Collector) visitDue(ctx context.Context, cfg *config) {
	for u, err := range c.DueURLs(ctx) {
		if err != nil {
			c.logger.Warn("recrawl: listing due pages", "err", err)
			return
		}
		req, err := c.newRequest(u, http.MethodGet, 1, nil, nil, nil)
		if err == nil {
			req.checkRevisit = true
			_, err = c.enter(cfg, req)
		}
		if err != nil {
			c.refuse(req, err)
		}
	}
}

// recrawlSitemapEntry makes loc due when its sitemap <lastmod> is newer than
// its last fetch.
func (c *Collector) recrawlSitemapEntry(cfg *config, loc string, lastmod time.Time) {
	if cfg.recrawl == nil || lastmod.IsZero() {
		return
	}
	p, err := urlkey.Parse(loc)
	if err != nil {
		return
	}
	key := urlkey.RequestKey(http.MethodGet, urlkey.Canonical(p, cfg.sortQuery), nil)
	if _, err := c.markDueKey(c.storeContext(), cfg, key, lastmod); err != nil {
		c.logger.Warn("recrawl: sitemap lastmod", "url", p.Redacted(), "err", err)
	}
}

// recrawlRefusal turns the refusal of a link to a page fetched by an
// earlier crawl, and not due, into a not-due refusal (ErrNotDue wrapping
// the *AlreadyVisitedError); other errors are returned as they are.
func (c *Collector) recrawlRefusal(req *Request, err error) error {
	if _, ok := errors.AsType[*AlreadyVisitedError](err); !ok || req.visitKey == 0 {
		return err
	}
	rc, ps, ok := c.pageStore(c.config())
	if !ok {
		return err
	}
	if _, revisited := rc.released.Load(req.visitKey); revisited {
		// Made due in this session: visited by it, whenever its new
		// state is stored.
		return err
	}
	states, found, gerr := ps.GetPages(req.stdContext(), req.visitKey)
	if gerr != nil || !found[0] || !states[0].Fetched.Before(rc.since) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotDue, err)
}

// revisit is what the download stage knows of a request's page in recrawl
// mode, from its conditional step to its outcome.
type revisit struct {
	key         uint64
	url         string
	prev        storage.PageState
	known       bool
	conditional bool
	store       storage.PageStore
	rc          *recrawler
	// archive is the page's archived captures, when the crawl archives.
	archive *archiveRef
}

// conditional looks up the page's state and, for a revisit of a page that
// answered 2xx, adds If-None-Match and If-Modified-Since (unless the
// request has them, or Refetch is set). It never ends the exchange.
func (x *exchange) conditional() bool {
	req := x.req
	rc, ps, ok := x.c.pageStore(x.cfg)
	if !ok || req.Method != http.MethodGet || req.visitKey == 0 {
		return false
	}
	states, found, err := ps.GetPages(x.ctx, req.visitKey)
	if err != nil {
		// Unknown state: no judgement is better than a wrong "new".
		x.c.logger.Warn("recrawl: reading page state", "url", req.URL.Redacted(), "request_id", req.ID, "err", err)
		return false
	}
	rv := &revisit{key: req.visitKey, url: req.URL.String(), prev: states[0], known: found[0], store: ps, rc: rc}
	x.revisit = rv
	rc.keepDepth(req, rv.prev)
	// Archiving: a 304 refers to the page's last capture, and the new
	// state keeps the capture of this answer (archive.go).
	x.ctx, rv.archive = x.c.withArchiveRef(x.ctx, rv.prev.Capture)
	if !rv.known || rc.policy.Refetch || rv.prev.Status < 200 || rv.prev.Status > 299 {
		return false
	}
	h := *req.Headers
	if rv.prev.ETag != "" && h.Get("If-None-Match") == "" {
		h.Set("If-None-Match", rv.prev.ETag)
		rv.conditional = true
	}
	if !rv.prev.LastModified.IsZero() && h.Get("If-Modified-Since") == "" {
		h.Set("If-Modified-Since", rv.prev.LastModified.UTC().Format(http.TimeFormat))
		rv.conditional = true
	}
	return false
}

// keepDepth gives a page queued as a root (depth 1, no parent: a due page
// from DueURLs, or its queue entry resumed after a crash) the depth its
// stored state was fetched at, so that it, its items and its links are
// where its crawl found them, not one level below the start. A link of
// this crawl has its own depth, and a start URL stays at 1.
func (rc *recrawler) keepDepth(req *Request, st storage.PageState) {
	if req.Depth != 1 || st.Depth <= 1 || req.ParentURL() != "" {
		return
	}
	if _, start := rc.starts.Load(req.visitKey); start {
		return
	}
	req.Depth = st.Depth
}

// recrawlOutcome judges resp, the answer to a request its conditional step
// looked up, stores the page's new state and schedule, sets resp.Change and
// counts it. A 304 to a conditional request is made a success.
func (x *exchange) recrawlOutcome(resp *Response) {
	rv := x.revisit
	if rv == nil {
		return
	}
	st := rv.prev
	st.URL = rv.url
	prevOK := rv.known && rv.prev.Status >= 200 && rv.prev.Status <= 299
	// A digest is stored by 2xx answers only and kept by the others, so a
	// state with one is a page that was there at some point: what gone
	// needs (a broken link 404 at every fetch is no change) and what makes
	// its first 2xx a change rather than new.
	existed := prevOK || rv.known && rv.prev.Digest != 0
	var ch Change
	switch s := resp.StatusCode; {
	case s == http.StatusNotModified && rv.conditional:
		resp.err = nil
		ch = ChangeUnchanged
		noteValidators(&st, resp.Headers)
		if c := rv.archive.capture(); !c.IsZero() {
			st.Capture = c
		}
	case s >= 200 && s <= 299:
		d := digest(resp.RawBody())
		switch {
		case !existed:
			ch = ChangeNew
		case prevOK && d == rv.prev.Digest:
			ch = ChangeUnchanged
		default:
			ch = ChangeChanged
		}
		if c := rv.archive.capture(); !c.IsZero() || d != st.Digest {
			// This answer's record; or none, when it was not archived
			// and the record kept is of another body.
			st.Capture = c
		}
		st.Status, st.Digest, st.ETag, st.LastModified = s, d, "", time.Time{}
		noteValidators(&st, resp.Headers)
	case isGoneStatus(s):
		if existed {
			ch = ChangeGone
		}
		st.Status, st.ETag, st.LastModified = s, "", time.Time{}
	case rv.known || !saysNothing(x.req, s):
		return // a redirect left unfollowed, a server error: nothing learnt
	default:
		// A first fetch the server failed (a 503, a 304 to no validator):
		// nothing is known of the page, but it is stored, with no Change,
		// so that the next recrawl tries it again from the store even if
		// no link leads there (its parent answering 304).
		st.Status = s
	}
	now := time.Now()
	st.Interval = nextInterval(rv.rc.policy, rv.known, rv.prev.Interval, ch)
	st.Fetched, st.Due, st.Change, st.Depth = now, now.Add(st.Interval), uint8(ch), x.req.Depth
	page := storage.Page{ID: rv.key, State: st}
	if lease := x.req.entry.leaseID; lease != "" {
		// A queue entry: its state is stored with its acknowledgement, so
		// a crash before that fetches it again and judges it against the
		// same state (see queueFrontier.ackWith).
		rv.rc.hold(lease, page)
	} else if err := rv.store.PutPages(x.ctx, page); err != nil {
		x.c.logger.Warn("recrawl: storing page state", "url", x.req.URL.Redacted(), "request_id", x.req.ID, "err", err)
	}
	resp.Change = ch
	rv.rc.counts[ch].Add(1)
}

func isGoneStatus(s int) bool { return s == http.StatusNotFound || s == http.StatusGone }

// noteValidators keeps the ETag and Last-Modified h carries.
func noteValidators(st *storage.PageState, h *http.Header) {
	if h == nil {
		return
	}
	if v := h.Get("ETag"); v != "" {
		st.ETag = v
	}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		st.LastModified = t
	}
}

// nextInterval adapts a page's revisit interval to what its fetch found, as
// Nutch's AdaptiveFetchSchedule does, within the policy's bounds.
func nextInterval(p RecrawlPolicy, known bool, cur time.Duration, ch Change) time.Duration {
	if !known || cur <= 0 {
		cur = p.MinInterval
	}
	f := 1.0
	switch ch {
	case ChangeUnchanged:
		f = revisitGrow
	case ChangeChanged:
		f = revisitShrink
	case ChangeGone:
		f = revisitGone
	}
	next := time.Duration(float64(cur) * f)
	return min(max(next, p.MinInterval), p.MaxInterval)
}

// digest is the body's 64-bit FNV-1a hash, never 0: a stored digest of 0
// means the URL never answered 2xx (see recrawlOutcome).
func digest(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return max(h.Sum64(), 1)
}

// hold keeps the state of a leased entry's page until its entry is settled.
func (rc *recrawler) hold(lease string, p storage.Page) {
	rc.heldMu.Lock()
	defer rc.heldMu.Unlock()
	if rc.held == nil {
		rc.held = make(map[string]storage.Page)
	}
	rc.held[lease] = p
}

// takePages removes and returns the page states held for the leases of
// ids: those of entries being acknowledged, to store with them, or of
// entries being released, whose pages are fetched and judged again.
func (f *queueFrontier) takePages(ids ...string) []storage.LeasePage {
	rc := f.cfg.recrawl
	if rc == nil {
		return nil
	}
	rc.heldMu.Lock()
	defer rc.heldMu.Unlock()
	var out []storage.LeasePage
	for _, id := range ids {
		if p, ok := rc.held[id]; ok {
			out = append(out, storage.LeasePage{Lease: id, Page: p})
			delete(rc.held, id)
		}
	}
	return out
}

// ackWith acknowledges the entries of ids and stores the page states their
// fetches produced: in one transaction when the queue is the page store
// and a storage.PageAcker (sqlitestore, redisstore on one server), so that
// after a crash an entry is either done with its state stored or fetched
// again and judged against the state it was judged against before, with
// the same Change. Otherwise the entries are acknowledged first and the
// states stored after: a crash between the two leaves a page its older
// state, so that a later recrawl reports its change once more, but this
// one's report stays exact.
func (f *queueFrontier) ackWith(ctx context.Context, ids []string, pages []storage.LeasePage) error {
	if len(pages) == 0 {
		return f.q.Ack(ctx, ids...)
	}
	_, ps, ok := f.c.pageStore(f.cfg)
	if !ok {
		return f.q.Ack(ctx, ids...)
	}
	if pa, isAcker := f.q.(storage.PageAcker); isAcker && any(f.q) == any(ps) {
		return pa.AckPages(ctx, ids, pages)
	}
	err := f.q.Ack(ctx, ids...)
	if err != nil && !errors.Is(err, storage.ErrUnknownLease) {
		return err
	}
	states := make([]storage.Page, len(pages))
	for i, p := range pages {
		states[i] = p.Page
	}
	if perr := ps.PutPages(ctx, states...); perr != nil {
		f.c.logger.Warn("recrawl: storing page states", "pages", len(states), "err", perr)
	}
	return err
}

// storeContext bounds the page store calls of MarkDue and sitemap entries,
// which take no context of their own: the collector's StdlibContext, so a
// crawl told to stop does not wait on its store.
func (c *Collector) storeContext() context.Context {
	if c.Context != nil {
		return c.Context
	}
	return context.Background()
}
