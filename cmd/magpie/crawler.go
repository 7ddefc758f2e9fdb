package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// crawlConfig is what both commands crawl with.
type crawlConfig struct {
	starts   []string
	depth    int // 0: unlimited
	parallel int
	delay    time.Duration
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
	// include: followed links must match one (start URLs always pass);
	// exclude and excludeExt refuse any URL, start URLs included.
	include    []*regexp.Regexp
	exclude    []*regexp.Regexp
	excludeExt []string
	scope      string // host, domain or subdomains
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
	// fetcher, when set, downloads the pages (the headless browser).
	fetcher magpie.Fetcher
	// onStart, when set, is given the collector before the crawl starts;
	// an error stops the crawl before it begins.
	onStart func(*magpie.Collector) error
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
	if len(cfg.fields) == 0 {
		return nil // pageRecord's field order
	}
	cols := []string{"url"}
	for _, f := range cfg.fields {
		cols = append(cols, f.name)
	}
	return cols
}

// startError is the error of start URLs that could not be crawled.
type startError struct {
	urls []string
	errs []error
}

func (e *startError) Error() string {
	var b strings.Builder
	for i, u := range e.urls {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "start URL %s: %v%s", u, e.errs[i], hint(e.errs[i]))
	}
	return b.String()
}

func (e *startError) Unwrap() []error { return e.errs }

// hint suggests the flag that lifts a refusal.
func hint(err error) string {
	if blocked, ok := errors.AsType[*magpie.BlockedAddressError](err); ok && !blocked.Addr.IsLoopback() {
		return " (private networks are refused)"
	}
	switch {
	case errors.Is(err, magpie.ErrPrivateNetwork):
		return " (private networks are refused; pass --allow-loopback to crawl 127.0.0.0/8 and ::1)"
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
	e := &startError{}
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

// scopeOptions returns the options that keep the crawl within scope of the
// start URLs: their hosts (AllowedDomains), or a URL filter for their
// domains or subdomains.
func scopeOptions(scope string, starts []*url.URL) ([]magpie.CollectorOption, error) {
	var hosts []string
	seen := map[string]bool{}
	for _, u := range starts {
		h := strings.ToLower(u.Hostname())
		if scope == "domain" {
			if d, err := publicsuffix.EffectiveTLDPlusOne(h); err == nil {
				h = d
			}
		}
		if !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	switch scope {
	case "host", "":
		return []magpie.CollectorOption{magpie.AllowedDomains(hosts...)}, nil
	case "domain", "subdomains":
		res := make([]*regexp.Regexp, 0, len(hosts))
		for _, h := range hosts {
			res = append(res, regexp.MustCompile(`(?i)^https?://([^/?#@]*\.)?`+regexp.QuoteMeta(h)+`(:\d+)?([/?#]|$)`))
		}
		return []magpie.CollectorOption{magpie.URLFilters(res...)}, nil
	}
	return nil, usagef("--scope %q: want host, domain or subdomains", scope)
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
	c, err := newCollector(ctx, cfg, parsed)
	if err != nil {
		return magpie.Stats{}, err
	}
	st := newStarts(cfg.starts)
	register(c, cfg, t, st)
	if cfg.recrawl != nil {
		registerRecrawl(c)
	}
	c.Pipeline(emit)
	if cfg.onStart != nil {
		if err := cfg.onStart(c); err != nil {
			return c.Stats(), err
		}
	}
	var runErr error
	if cfg.state != nil {
		runErr = runFromState(ctx, c, cfg.state, max(cfg.parallel, 1), st, cfg.recrawlExplicit)
	} else {
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

// newCollector builds the collector cfg describes, for the start URLs.
func newCollector(ctx context.Context, cfg crawlConfig, starts []*url.URL) (*magpie.Collector, error) {
	opts, err := collectorOptions(cfg, starts)
	if err != nil {
		return nil, err
	}
	if cfg.state == nil {
		// A queue run takes ctx itself: when it ends, requests in flight
		// are released back to the state file rather than failed.
		opts = append(opts, magpie.StdlibContext(ctx))
	}
	c := magpie.NewCollector(opts...)
	c.SetRequestTimeout(cfg.timeout)
	if cfg.proxy != "" {
		if err := c.SetProxy(cfg.proxy); err != nil {
			return nil, usagef("--proxy: %w", err)
		}
	}
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: max(cfg.parallel, 1), Delay: cfg.delay}); err != nil {
		return nil, err
	}
	return c, nil
}

// collectorOptions are the options cfg sets.
func collectorOptions(cfg crawlConfig, starts []*url.URL) ([]magpie.CollectorOption, error) {
	var allow []netip.Prefix
	if cfg.allowLoopback {
		allow = loopback
	}
	opts := []magpie.CollectorOption{
		magpie.Async(true),
		magpie.MaxDepth(cfg.depth),
		// URLs from the internet must not make the crawler reach the
		// machine's own or its network's services.
		magpie.DenyPrivateNetworks(allow...),
	}
	scope, err := scopeOptions(cfg.scope, starts)
	if err != nil {
		return nil, err
	}
	opts = append(opts, scope...)
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
	}
	if cfg.maxPages > 0 {
		opts = append(opts, magpie.MaxRequests(uint32(cfg.maxPages)))
	}
	if cfg.ignoreRobots {
		opts = append(opts, magpie.IgnoreRobotsTxt())
	} else if cfg.sitemaps {
		opts = append(opts, magpie.SitemapsFromRobots())
	}
	if cfg.fetcher != nil {
		opts = append(opts, magpie.WithFetcher(cfg.fetcher))
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
func runFromState(ctx context.Context, c *magpie.Collector, store *sqlitestore.Store, threads int, st *starts, recrawlExplicit bool) error {
	if err := c.SetStorage(store); err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	q, err := queue.New(threads, store)
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	if recrawling, err := recrawlStarts(ctx, c, store, q, st, recrawlExplicit); err != nil || recrawling {
		if err != nil {
			return err
		}
		return q.RunContext(ctx, c)
	}
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
	return q.RunContext(ctx, c)
}

// register sets the collector's callbacks: the page items, the links
// followed, and the tally.
func register(c *magpie.Collector, cfg crawlConfig, t *tally, st *starts) {
	c.OnRequest(st.requested)
	c.OnResponse(func(r *magpie.Response) {
		st.fetched(r.Request)
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
		if len(cfg.include) > 0 && !matchAny(cfg.include, link) {
			t.skip("not in --include (skipped)")
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
				}
				rec.values = append(rec.values, strings.TrimSpace(v))
			}
			e.Emit(rec)
		})
	}
	c.OnScraped(func(r *magpie.Response) {
		t.page()
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
		t.fail(failureKind(err))
		st.failedRequest(r.Request, err)
	})
	c.OnRefused(func(r *magpie.Request, err error) {
		t.skip(skipKind(err))
		st.failedRequest(r, err)
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
