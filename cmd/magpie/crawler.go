package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// crawlConfig is what both commands crawl with.
type crawlConfig struct {
	starts   []string
	depth    int // 0: unlimited
	parallel int
	delay    time.Duration
	// politeness says which hosts share parallel and delay (--politeness).
	politeness limits.Politeness
	// allowLoopback lets the crawl reach loopback addresses, which the
	// private-network guard refuses otherwise.
	allowLoopback bool
	// fields, when set, make each page's item {url, fields...} instead of
	// a pageRecord; follow selects the links followed (default a[href]).
	fields []field
	follow string

	userAgent string
	headers   map[string]string
	proxy     string
	timeout   time.Duration // per request, body included; 0: no bound
	retries   int           // extra tries after a failed one; 0: none
	maxPages  int           // 0: no limit
	// maxPagesPerHost bounds the requests to each host; 0: no limit.
	maxPagesPerHost int
	// priorities rank pages by URL (--priority); order is --order
	// (breadth, depth or "").
	priorities priorityFlags
	order      string
	// include: followed links must match one (start URLs always pass);
	// exclude and excludeExt refuse any URL, start URLs included.
	include    []*regexp.Regexp
	exclude    []*regexp.Regexp
	excludeExt []string
	scope      string // host, domain or subdomains
	noParent   bool   // --no-parent: never above a start URL's directory
	// ignoreRobots skips robots.txt; sitemaps visits the sitemaps that
	// robots.txt lists and /sitemap.xml of each start URL's host.
	ignoreRobots bool
	sitemaps     bool
	// state, when set, holds the crawl (visited set, frontier, cookies) so
	// that a stopped crawl resumes where it stopped.
	state *sqlitestore.Store
	// recrawl, set with state, records and revisits pages (recrawl.go);
	// recrawlExplicit is set when a recrawl flag was given.
	recrawl         *magpie.RecrawlPolicy
	recrawlExplicit bool
	// maxRetryAfter bounds the wait for a server's Retry-After (0: the
	// library's MaxHold); a longer one fails the page as busy.
	maxRetryAfter time.Duration
	// fetcher, when set, downloads the pages (the headless browser).
	fetcher magpie.Fetcher
	// onStart, when set, is given the collector before the crawl starts;
	// an error stops the crawl before it begins.
	onStart func(*magpie.Collector) error
	// ready, when set, runs just before the first request (after a --state
	// run found work to do); an error stops the crawl before it begins.
	ready func() error
	// allowPrivate are the networks --allow-private lets through the
	// guard; insecure skips certificate checks (--insecure).
	allowPrivate []string
	insecure     bool
	// failures, when set, is told of every failed request (--errors, -v);
	// includeFailed makes each failed page an item too.
	failures      *failures
	includeFailed bool
}

// field is one --field NAME=CSS[@attr]: the text (or attribute) of the
// first element CSS matches.
type field struct{ name, css, attr string }

// loopback is what --allow-loopback lets through the guard.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// pageRecord is one item of crawl output without --field.
type pageRecord struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Title  string `json:"title"`
	Depth  int    `json:"depth"`
	Links  int    `json:"links"`
	// Change is what a recrawl found (new, changed, unchanged, gone).
	Change string `json:"change,omitempty"`
	// Kind and Error say why a failed page (--include-failed) failed, as
	// --errors does.
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
}

// pageColumns are a pageRecord's CSV columns, fixed in a --state crawl:
// its first item may be a bodiless one, which lacks title and links.
var pageColumns = []string{"url", "status", "title", "depth", "links", "change"}

// bodilessRecord is the item of a revisited page that sent no body: a 304
// (unchanged) or a 404 or 410 where a page was (gone). Its title and links
// are not known, so it leaves them out rather than writing "" and 0 as data.
type bodilessRecord struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Depth  int    `json:"depth"`
	Change string `json:"change"`
}

// bodilessItem is the item of a revisited page that sent no body: a 304
// (unchanged), or a 404 or 410 where a page was (gone). What its body
// would have given (title and links, or the --field values) is not known:
// it is left out, an empty cell in a CSV, rather than written as data.
func bodilessItem(cfg crawlConfig, r *magpie.Response) any {
	u := r.Request.URL.String()
	if len(cfg.fields) == 0 {
		return bodilessRecord{URL: u, Status: r.StatusCode, Depth: r.Request.Depth, Change: r.Change.String()}
	}
	rec := fieldRecord{names: []string{"url", "change"}, values: []string{u, r.Change.String()}}
	if cfg.includeFailed {
		rec.names = append(rec.names, "status")
		rec.values = append(rec.values, strconv.Itoa(r.StatusCode))
	}
	return rec
}

// fieldRecord is one item of crawl output with --field: the URL, then the
// fields in the order they were given (a map would sort them).
type fieldRecord struct {
	names, values []string
}

// MarshalJSON writes the record as an object with its keys in order.
func (r fieldRecord) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range r.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(r.values[i])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// columns are the output's CSV columns for cfg.
func (cfg *crawlConfig) columns() []string {
	if len(cfg.fields) == 0 && cfg.recrawl != nil {
		return pageColumns
	}
	if len(cfg.fields) == 0 {
		if !cfg.includeFailed {
			return nil // pageRecord's field order
		}
		// A failed page's kind and error: columns, whichever item comes first.
		cols := []string{"url", "status", "title", "depth", "links"}
		if cfg.recrawl != nil {
			cols = append(cols, "change")
		}
		return append(cols, "kind", "error")
	}
	cols := []string{"url"}
	for _, f := range cfg.fields {
		cols = append(cols, f.name)
	}
	if cfg.recrawl != nil {
		cols = append(cols, "change") // what a recrawl found, as without --field
	}
	if cfg.includeFailed {
		// Failed pages are told apart by these.
		cols = append(cols, "status", "kind", "error")
	}
	return cols
}

// startError is the error of start URLs that could not be crawled.
type startError struct {
	urls  []string
	errs  []error
	proxy string // --proxy, named in its errors
}

func (e *startError) Error() string {
	var b strings.Builder
	for i, u := range e.urls {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "start URL %s: %s%s", u, describe(e.errs[i], e.proxy), hint(e.errs[i]))
	}
	return b.String()
}

func (e *startError) Unwrap() []error { return e.errs }

// hint suggests the flag that lifts a refusal.
func hint(err error) string {
	if h := networkHint(err); h != "" {
		return h
	}
	switch {
	case errors.Is(err, magpie.ErrRobotsTxtBlocked):
		return " (pass --ignore-robots to crawl it anyway)"
	case errors.Is(err, magpie.ErrForbiddenURL):
		return " (it matches --exclude or --exclude-ext)"
	}
	return ""
}

// starts tracks the start URLs of a crawl and what became of them: a start
// URL that was refused or failed makes the crawl fail. Safe for concurrent
// use.
type starts struct {
	// mu guards everything below.
	mu     sync.Mutex
	order  []string          // the start URLs as given
	byKey  map[string]string // startKey → start URL
	byID   map[uint32]string // request ID → start URL, once requested
	failed map[string]error
	done   map[string]bool // fetched, or failed
	proxy  string          // --proxy, named in its errors; set before the crawl
}

func newStarts(urls []string) *starts {
	s := &starts{byKey: map[string]string{}, byID: map[uint32]string{}, failed: map[string]error{}, done: map[string]bool{}}
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			continue
		}
		if _, dup := s.byKey[startKey(p)]; dup {
			continue
		}
		s.byKey[startKey(p)] = u
		s.order = append(s.order, u)
	}
	return s
}

// startKey compares URLs as the collector writes them.
func startKey(u *url.URL) string {
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	host := strings.ToLower(u.Host)
	scheme := strings.ToLower(u.Scheme)
	if h, p, ok := strings.Cut(host, ":"); ok && ((scheme == "http" && p == "80") || (scheme == "https" && p == "443")) {
		host = h
	}
	return scheme + "://" + host + path + "?" + u.RawQuery
}

// of returns the start URL r is the request of, if it is one.
func (s *starts) of(r *magpie.Request) (string, bool) {
	if r == nil || r.URL == nil || r.Depth != 1 || r.ParentURL() != "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.byID[r.ID]; ok {
		return u, true
	}
	u, ok := s.byKey[startKey(r.URL)]
	return u, ok
}

// requested remembers r's ID when it is a start URL, so that it is known
// after redirects changed its URL.
func (s *starts) requested(r *magpie.Request) {
	if u, ok := s.of(r); ok {
		s.mu.Lock()
		s.byID[r.ID] = u
		s.mu.Unlock()
	}
}

func (s *starts) fetched(r *magpie.Request) {
	if u, ok := s.of(r); ok {
		s.mu.Lock()
		s.done[u] = true
		s.mu.Unlock()
	}
}

// fail records err for the start URL u (the first error counts).
func (s *starts) fail(u string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.failed[u]; !ok {
		s.failed[u] = err
	}
	s.done[u] = true
}

// failedRequest records err if r is a start URL's request.
func (s *starts) failedRequest(r *magpie.Request, err error) {
	if u, ok := s.of(r); ok {
		s.fail(u, err)
	}
}

// skip marks u as needing no fetch (already crawled in the state file).
func (s *starts) skip(u string) {
	s.mu.Lock()
	s.done[u] = true
	s.mu.Unlock()
}

// err returns the failures in the order the URLs were given; a start URL
// that neither succeeded nor failed counts as failed when the crawl was
// not cut short.
func (s *starts) err(cutShort bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &startError{proxy: s.proxy}
	for _, u := range s.order {
		err, failed := s.failed[u]
		if !failed && !s.done[u] && !cutShort {
			err, failed = errors.New("no response"), true
		}
		if failed {
			e.urls = append(e.urls, u)
			e.errs = append(e.errs, err)
		}
	}
	if len(e.urls) == 0 {
		return nil
	}
	return e
}

// extensionFilter refuses URLs whose path ends in one of exts.
func extensionFilter(exts []string) *regexp.Regexp {
	if len(exts) == 0 {
		return nil
	}
	quoted := make([]string, 0, len(exts))
	for _, e := range exts {
		if e = strings.TrimPrefix(strings.TrimSpace(e), "."); e != "" {
			quoted = append(quoted, regexp.QuoteMeta(e))
		}
	}
	if len(quoted) == 0 {
		return nil
	}
	return regexp.MustCompile(`(?i)^[^?#]*\.(` + strings.Join(quoted, "|") + `)([?#]|$)`)
}

// crawl crawls from cfg.starts and calls emit for every item. The error
// names the start URLs that could not be fetched, or what kept the crawl
// from running; ctx's cause when it ended the crawl.
func crawl(ctx context.Context, cfg crawlConfig, t *tally, emit magpie.ItemProcessor) (magpie.Stats, error) {
	parsed, err := parseStarts(cfg.starts)
	if err != nil {
		return magpie.Stats{}, err
	}
	c, err := newCollector(ctx, cfg)
	if err != nil {
		return magpie.Stats{}, err
	}
	st := newStarts(cfg.starts)
	st.proxy = cfg.proxy
	sc := newScope(cfg.scope, parsed)
	if cfg.noParent {
		sc.keepBelow(parsed)
	}
	c.SetRedirectHandler(sc.redirects(st))
	fl := cfg.failures
	if fl == nil {
		fl = &failures{}
	}
	fl.t, fl.proxy = t, cfg.proxy
	fl.stopping = func() bool { return ctx.Err() != nil }
	register(c, cfg, t, st, sc, fl)
	if cfg.recrawl != nil {
		registerRecrawl(c, cfg)
	}
	c.Pipeline(emit)
	if cfg.onStart != nil {
		if err := cfg.onStart(c); err != nil {
			return c.Stats(), err
		}
	}
	var runErr error
	if cfg.state != nil {
		runErr = runFromState(ctx, c, cfg.state, max(cfg.parallel, 1), st, cfg.ready, cfg.recrawlExplicit)
		if _, usage := errors.AsType[*usageError](runErr); usage || errors.Is(runErr, errFinished) {
			return c.Stats(), runErr // nothing was fetched
		}
	} else {
		if cfg.ready != nil {
			if err := cfg.ready(); err != nil {
				return c.Stats(), err
			}
		}
		for _, u := range st.order {
			if err := c.Visit(u); err != nil {
				st.fail(u, err)
			}
		}
		if cfg.sitemaps {
			for _, u := range sitemapURLs(parsed) {
				_ = c.VisitSitemap(u) // a refusal reaches OnRefused
			}
		}
		c.Wait()
	}
	stats := c.Stats()
	if err := ctx.Err(); err != nil {
		return stats, errors.Join(st.err(true), context.Cause(ctx))
	}
	return stats, errors.Join(runErr, st.err(false))
}

// parseStarts checks the start URLs: at least one, each http or https.
func parseStarts(starts []string) ([]*url.URL, error) {
	if len(starts) == 0 {
		return nil, usagef("missing URL: magpie crawl URL... (or --list FILE)")
	}
	parsed := make([]*url.URL, 0, len(starts))
	for _, s := range starts {
		if _, err := allowedPrefixes(false, []string{s}); err == nil {
			return nil, usagef("%q is not a URL: give networks as --allow-private=%s (with =)", s, s)
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, usagef("start URL: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, usagef("start URL %q: want an http or https URL", s)
		}
		parsed = append(parsed, u)
	}
	return parsed, nil
}

// newCollector builds the collector cfg describes.
func newCollector(ctx context.Context, cfg crawlConfig) (*magpie.Collector, error) {
	opts, err := collectorOptions(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.state == nil {
		// A queue run takes ctx itself: when it ends, requests in flight
		// are released back to the state file rather than failed.
		opts = append(opts, magpie.StdlibContext(ctx))
	}
	c := magpie.NewCollector(opts...)
	if err := networkSetup(c, cfg); err != nil {
		return nil, err
	}
	c.SetRequestTimeout(cfg.timeout)
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: max(cfg.parallel, 1), Delay: cfg.delay,
		PolitenessBy: cfg.politeness}); err != nil {
		return nil, err
	}
	return c, nil
}

// collectorOptions are the options cfg sets.
func collectorOptions(ctx context.Context, cfg crawlConfig) ([]magpie.CollectorOption, error) {
	allow, err := allowedPrefixes(cfg.allowLoopback, cfg.allowPrivate)
	if err != nil {
		return nil, err
	}
	if cfg.proxy != "" {
		trusted, err := trustProxy(ctx, cfg.proxy)
		if err != nil {
			return nil, err
		}
		allow = append(allow, trusted...)
	}
	opts := []magpie.CollectorOption{
		magpie.Async(true),
		// URLs from the internet must not make the crawler reach the
		// machine's own or its network's services.
		magpie.DenyPrivateNetworks(allow...),
		// Nothing here keeps a page's body: the items hold strings.
		magpie.ReuseBody(),
	}
	deny := append([]*regexp.Regexp(nil), cfg.exclude...)
	if re := extensionFilter(cfg.excludeExt); re != nil {
		deny = append(deny, re)
	}
	if len(deny) > 0 {
		opts = append(opts, magpie.DisallowedURLFilters(deny...))
	}
	if cfg.userAgent != "" {
		opts = append(opts, magpie.UserAgent(cfg.userAgent))
	}
	if len(cfg.headers) > 0 {
		opts = append(opts, magpie.Headers(cfg.headers))
	}
	if cfg.retries > 0 {
		opts = append(opts, magpie.RetryPolicy(magpie.RetryOptions{MaxAttempts: cfg.retries + 1}))
	} else {
		// --retries 0 means no retries of any kind: not the library's
		// retries of 429 and 503 with Retry-After either.
		opts = append(opts, magpie.BusyRetries(0))
	}
	if cfg.maxRetryAfter > 0 {
		opts = append(opts, magpie.MaxRetryAfter(cfg.maxRetryAfter))
	}
	if cfg.maxPages > 0 {
		opts = append(opts, magpie.MaxRequests(uint32(cfg.maxPages)))
	}
	if cfg.maxPagesPerHost > 0 {
		opts = append(opts, magpie.MaxRequestsPerHost(cfg.maxPagesPerHost))
	}
	opts = append(opts, priorityOptions(cfg.priorities, cfg.order)...)
	if cfg.ignoreRobots {
		opts = append(opts, magpie.IgnoreRobotsTxt())
	} else if cfg.sitemaps {
		opts = append(opts, magpie.SitemapsFromRobots())
	}
	if cfg.fetcher != nil {
		opts = append(opts, magpie.WithFetcher(cfg.fetcher))
	}
	if len(cfg.fields) == 0 {
		// The page items need only title and the followed links: the
		// library matches them while tokenizing, and parses a page whole
		// when a --follow selector or the page itself does not allow it.
		// --field's selectors look inside the whole document.
		opts = append(opts, magpie.StreamHTML())
	}
	if cfg.recrawl != nil {
		opts = append(opts, magpie.Recrawl(*cfg.recrawl))
	}
	return opts, nil
}

// sitemapURLs are /sitemap.xml of each start URL's origin.
func sitemapURLs(starts []*url.URL) []string {
	var out []string
	seen := map[string]bool{}
	for _, u := range starts {
		s := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/sitemap.xml"}).String()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// runFromState crawls with the state file as frontier and visited set: the
// start URLs already crawled there are not fetched again, and the requests
// left in its queue by a crawl that stopped are taken up.
func runFromState(ctx context.Context, c *magpie.Collector, store *sqlitestore.Store, threads int, st *starts, ready func() error, recrawlExplicit bool) error {
	if err := c.SetStorage(store); err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	q, err := queue.New(threads, store)
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	recrawling, err := recrawlStarts(ctx, c, store, q, st, recrawlExplicit)
	if err != nil {
		return err
	}
	if !recrawling {
		for _, u := range st.order {
			visited, err := c.HasVisited(u)
			if err != nil {
				return fmt.Errorf("--state: %w", err)
			}
			if visited {
				st.skip(u)
				continue
			}
			if err := q.AddURL(u); err != nil {
				return fmt.Errorf("--state: %w", err)
			}
		}
		if finished, err := stateFinished(q, st); err != nil || finished {
			return cmp.Or(err, errFinished)
		}
	}
	if ready != nil {
		if err := ready(); err != nil {
			return err
		}
	}
	return q.RunContext(ctx, c)
}

// register sets the collector's callbacks: the page items, the links
// followed, and the tally.
func register(c *magpie.Collector, cfg crawlConfig, t *tally, st *starts, sc *scope, fl *failures) {
	c.OnRequest(func(r *magpie.Request) {
		st.requested(r)
		// Links are checked before Visit; a sitemap's entries (depth 1,
		// with the sitemap as parent) are checked here.
		if r.Depth == 1 && r.ParentURL() != "" && !sc.allows(r.URL) {
			t.skip(skipKind(magpie.ErrForbiddenDomain), r.URL.String())
			r.Abort()
		}
	})
	c.OnResponse(func(r *magpie.Response) {
		st.fetched(r.Request)
		fl.fetched(r)
		// Where a start URL landed joins the scope; other pages are in it.
		sc.add(r.Request.URL)
		if _, ok := st.of(r.Request); ok {
			sc.land(r.Request.URL) // --no-parent: its directory too
		}
		// Children get a copy of their parent's Context: start each page afresh.
		r.Ctx.Put("title", "")
		r.Ctx.Put("links", 0)
	})
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		e.Request.Ctx.Put("title", strings.TrimSpace(e.Text))
	})
	follow := cfg.follow
	if follow == "" {
		follow = "a[href]"
	}
	c.OnHTML(follow, func(e *magpie.HTMLElement) {
		n, _ := e.Request.Ctx.GetAny("links").(int)
		e.Request.Ctx.Put("links", n+1)
		link := e.Request.AbsoluteURL(e.Attr("href"))
		if link == "" {
			return
		}
		// --depth counts links, not redirects (as wget's -l does): it is
		// checked here rather than by the collector, which counts each
		// redirect as a level and so would refuse a start URL's redirect
		// under --depth 1.
		if cfg.depth > 0 && e.Request.Depth >= cfg.depth {
			t.skip(skipKind(magpie.ErrMaxDepth), link)
			return
		}
		if u, err := url.Parse(link); err == nil && !sc.allows(u) {
			t.skip(skipKind(magpie.ErrForbiddenDomain), link)
			return
		}
		if len(cfg.include) > 0 && !matchAny(cfg.include, link) {
			t.skip("not in --include (skipped)", link)
			return
		}
		// Refusals (scope, robots.txt, already visited) reach OnRefused.
		_ = e.Request.Visit(link)
	})
	if len(cfg.fields) > 0 {
		// One item per page: its URL and the fields, through the pipeline.
		c.OnHTML("html", func(e *magpie.HTMLElement) {
			rec := fieldRecord{names: cfg.columns(), values: []string{e.Request.URL.String()}}
			for _, f := range cfg.fields {
				sel := e.DOM.Find(f.css).First()
				v := sel.Text()
				if f.attr != "" {
					v, _ = sel.Attr(f.attr)
					if absoluteAttrs[strings.ToLower(f.attr)] && strings.TrimSpace(v) != "" {
						// A fragment alone resolves to nothing: kept as written.
						v = cmp.Or(e.Request.AbsoluteURL(strings.TrimSpace(v)), v)
					}
				}
				rec.values = append(rec.values, strings.TrimSpace(v))
			}
			if cfg.recrawl != nil {
				rec.values = append(rec.values, e.Response.Change.String())
			}
			if cfg.includeFailed {
				rec.values = append(rec.values, strconv.Itoa(e.Response.StatusCode), "", "")
			}
			e.Emit(rec)
		})
	}
	c.OnScraped(func(r *magpie.Response) {
		t.page()
		if r.StatusCode == http.StatusNotModified && r.Change == magpie.ChangeUnchanged {
			r.Emit(bodilessItem(cfg, r)) // no HTML: OnHTML("html") did not run for it
			return
		}
		if len(cfg.fields) > 0 {
			return
		}
		links, _ := r.Ctx.GetAny("links").(int)
		r.Emit(pageRecord{
			URL:    r.Request.URL.String(),
			Status: r.StatusCode,
			Title:  r.Ctx.Get("title"),
			Depth:  r.Request.Depth,
			Links:  links,
			Change: r.Change.String(),
		})
	})
	c.OnError(func(r *magpie.Response, err error) {
		f := fl.record(r, err)
		st.failedRequest(r.Request, err)
		if cfg.includeFailed && r.Request != nil && r.Request.URL != nil && emitsFailed(err) && f.Kind != kindCancelled {
			r.Emit(failedItem(cfg, r, f))
		}
	})
	c.OnRefused(func(r *magpie.Request, err error) {
		kind, first := t.refused(r, err)
		switch {
		case kind == "":
			fl.linkedAgain(r) // a page already taken
		case first && (errors.Is(err, magpie.ErrRobotsTxtBlocked) || errors.Is(err, magpie.ErrRobotsTxtUnavailable)):
			fl.skipped(kind, r)
		}
		st.failedRequest(r, err)
		if first {
			fl.refused(r, err) // each URL once, as for robots.txt
		}
	})
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
