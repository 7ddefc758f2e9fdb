package magpie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/magpiecrawl/magpie/internal/urlkey"
	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/storage"
)

// defaultRequestTimeout bounds a whole fetch, body included.
const defaultRequestTimeout = 10 * time.Second

// httpBackend owns the one HTTP client of a collector and its clones.
type httpBackend struct {
	// mu guards client; a fetch copies the pointer, so replacing it never
	// disturbs a fetch in flight.
	mu     sync.RWMutex
	client *http.Client
	sh     *shared
	// own is the transport magpie built and tuned itself (guarded by mu);
	// only that one is retuned for more workers, never a user's.
	own *http.Transport
	// guard, when set by DenyPrivateNetworks, checks every dialled address
	// (guarded by mu); guarded is the transport it was last applied to.
	guard   *netGuard
	guarded http.RoundTripper
	// archiver, when set by WithArchiver, receives every exchange (guarded
	// by mu); the transport is wrapped to record them (see applyGuard).
	archiver Archiver
	// pin, set once a host may be keyed by address (PolitenessIP), makes
	// the transport's dials go to the address keyed (guarded by mu; see
	// pinTransport).
	pin bool
	// tunnels carry HTTPS through a proxy while archiving (archive.go).
	tunnels archiveTunnels
	// schemes caches, for the current client, whether its transport serves
	// a scheme other than http and https (guarded by mu; reset by update).
	schemes map[string]bool
}

// supportsScheme reports whether the client's transport serves URLs of
// scheme, as an *http.Transport does for a protocol registered with
// RegisterProtocol (Colly's local_files example registers "file"). The
// transport is asked once per scheme, with a request whose context is
// already cancelled for a path that does not exist: a transport without the
// protocol answers "unsupported protocol scheme" without any I/O.
func (b *httpBackend) supportsScheme(scheme string) bool {
	b.mu.RLock()
	ok, known := b.schemes[scheme]
	rt := b.client.Transport
	b.mu.RUnlock()
	if known {
		return ok
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok = false
	if req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+":///magpie-scheme-probe/does-not-exist", nil); err == nil {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		ok = err == nil || !strings.Contains(err.Error(), "unsupported protocol scheme")
	}
	b.mu.Lock()
	if b.client.Transport == rt || (b.client.Transport == nil && rt == http.DefaultTransport) {
		if b.schemes == nil {
			b.schemes = make(map[string]bool)
		}
		b.schemes[scheme] = ok
	}
	b.mu.Unlock()
	return ok
}

func newHTTPBackend(sh *shared) *httpBackend {
	jar, _ := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List}) // never fails with options
	b := &httpBackend{sh: sh, own: NewTransport()}
	b.client = &http.Client{
		Transport:     b.own,
		Jar:           capJar(jar),
		Timeout:       defaultRequestTimeout,
		CheckRedirect: checkRedirect,
	}
	return b
}

// NewTransport returns a new transport tuned as the collector's own is:
// many idle connections per host (the standard 2 makes a busy crawl open
// thousands of connections), an idle pool sized for crawls of many hosts
// (half the process's open-file limit, within 1,024 and 65,536), and no
// transparent gzip, since the collector decodes bodies itself and a
// transport that decodes them breaks that. Change what you need (TLS
// settings, a proxy) and pass it to WithTransport. A transport given to
// WithTransport is used as it is: Workers does not resize its per-host pool.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = idleConnBudget(openFileLimit())
	t.MaxIdleConnsPerHost = 128
	t.DisableCompression = true
	return t
}

// Bounds of the idle pool of magpie's own transport (idleConnBudget).
const (
	// minIdleConns is the least the pool keeps whatever the open-file
	// limit: what a crawl of one host with many workers needs.
	minIdleConns = 1024
	// maxIdleConns caps the pool where the open-file limit is high (or
	// unknown): an idle connection costs some 20 KB here (two goroutines,
	// two buffers; a TLS one more; TestIdleConnBytes), and a crawl with
	// more hosts than this waiting for their next turn at once is not one
	// process's crawl.
	maxIdleConns = 1 << 16
)

// idleConnBudget is MaxIdleConns of magpie's own transport for a process
// allowed openFiles open files (0: unknown). A crawl of many hosts with a
// per-host Delay keeps one connection per host idle between the host's
// requests; a global cap below the number of hosts in rotation closes the
// least recently used one, which is the host served next, so every request
// dials again (2,000 hosts under the former cap of 1,024: 100,469 dials for
// 102,000 requests). So the pool is sized by what can be held: half the open-file
// limit, leaving the rest to active connections, files and listeners,
// within [minIdleConns, maxIdleConns]. Idle connections still close after
// IdleConnTimeout, so a finished host's does not stay.
func idleConnBudget(openFiles uint64) int {
	if openFiles == 0 {
		return maxIdleConns
	}
	return int(min(max(openFiles/2, minIdleConns), maxIdleConns))
}

func (b *httpBackend) get() *http.Client {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.client
}

// update replaces the client with a modified copy.
func (b *httpBackend) update(f func(*http.Client)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := *b.client
	f(&n)
	b.client = &n
	b.schemes = nil
	b.applyGuard()
}

// setGuard makes every connection of the client go through g.
func (b *httpBackend) setGuard(g *netGuard) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.guard, b.guarded = g, nil
	b.applyGuard()
}

// applyGuard puts the guard, the dial pin, then the archive recording, on
// the client's transport if they are not there yet; called under mu.
func (b *httpBackend) applyGuard() {
	if (b.guard == nil && b.archiver == nil && !b.pin) || (b.guarded != nil && b.client.Transport == b.guarded) {
		return
	}
	rt := b.client.Transport
	if rt == nil {
		rt = http.DefaultTransport // what a nil Transport means; cloned below
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		// A RoundTripper of the user's own: its connections are its own.
		b.guarded = b.client.Transport
		return
	}
	if b.guard != nil {
		t = b.guard.guard(t, t == b.own)
	}
	if b.pin {
		// A clone, since t may be in use: magpie's own one stays its own.
		if old := b.own; t == old {
			t = pinTransport(t)
			b.own = t
			old.CloseIdleConnections()
		} else {
			t = pinTransport(t)
		}
	}
	if b.archiver != nil {
		t = archiveTransport(t)
	}
	b.client.Transport, b.guarded = t, t
}

// keepIdleFor makes magpie's own transport keep an idle connection per
// download worker, so that a crawl with more workers than
// MaxIdleConnsPerHost does not close and redial connections all the time
// ("new connections ≈ workers"). A transport set by the user is left alone.
func (b *httpBackend) keepIdleFor(workers int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.client.Transport.(*http.Transport)
	if !ok || t != b.own || t.MaxIdleConnsPerHost >= workers {
		return
	}
	// A Transport must not be changed once used: replace it by a tuned
	// clone (the old one's idle connections are closed when unreferenced).
	n := t.Clone()
	n.MaxIdleConnsPerHost = workers
	n.MaxIdleConns = max(n.MaxIdleConns, workers)
	cl := *b.client
	cl.Transport = n
	b.client = &cl
	b.own = n
	t.CloseIdleConnections()
}

func (b *httpBackend) setJar(j http.CookieJar) { b.update(func(c *http.Client) { c.Jar = capJar(j) }) }

// SetClient replaces the HTTP client (shared with clones). magpie keeps its
// own redirect checks on it; use SetRedirectHandler for custom redirect rules.
func (c *Collector) SetClient(client *http.Client) {
	n := *client
	n.CheckRedirect = checkRedirect
	c.shared.backend.mu.Lock()
	c.shared.backend.client = &n
	c.shared.backend.schemes = nil
	c.shared.backend.applyGuard() // DenyPrivateNetworks covers the new transport too
	c.shared.backend.mu.Unlock()
}

// WithTransport replaces the client's transport.
func (c *Collector) WithTransport(rt http.RoundTripper) {
	c.shared.backend.update(func(cl *http.Client) { cl.Transport = rt })
}

// SetRequestTimeout bounds each whole fetch, body included (default 10 s; 0: no bound).
func (c *Collector) SetRequestTimeout(d time.Duration) {
	c.shared.backend.update(func(cl *http.Client) { cl.Timeout = d })
}

// DisableCookies stops storing and sending cookies.
func (c *Collector) DisableCookies() { c.shared.backend.setJar(nil) }

// SetCookieJar replaces the cookie jar.
func (c *Collector) SetCookieJar(j http.CookieJar) { c.shared.backend.setJar(j) }

// SetCookies stores cookies for u in the jar; ErrNoCookieJar when cookies are disabled.
func (c *Collector) SetCookies(u string, cookies []*http.Cookie) error {
	j := c.shared.backend.get().Jar
	if j == nil {
		return ErrNoCookieJar
	}
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	j.SetCookies(p, cookies)
	return nil
}

// Cookies returns the cookies the jar would send to u (nil without a jar).
func (c *Collector) Cookies(u string) []*http.Cookie {
	j := c.shared.backend.get().Jar
	if j == nil {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil {
		return nil
	}
	return j.Cookies(p)
}

// SetProxy sends every request through the proxy at proxyURL.
func (c *Collector) SetProxy(proxyURL string) error {
	p, err := url.Parse(proxyURL)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	c.SetProxyFunc(http.ProxyURL(p))
	return nil
}

// SetProxyFunc chooses a proxy per request. Keep-alives stay on: the
// transport asks f for every request and pools connections per proxy. A
// transport that is not an *http.Transport is replaced by a tuned one. The
// signature is Colly's.
func (c *Collector) SetProxyFunc(f ProxyFunc) {
	c.shared.backend.update(func(cl *http.Client) {
		t, ok := cl.Transport.(*http.Transport)
		if ok {
			t = t.Clone()
		} else {
			t = NewTransport()
		}
		t.Proxy = f
		cl.Transport = t
	})
}

// storageJar is a cookie jar kept in a storage.Storage, so that cookies
// survive with the store and are shared by every process that uses it. The
// store scopes them (the durable stores by host, path and Secure, see
// storage.SelectCookies). http.CookieJar has no error path, so a failing
// CookieStore is logged at Warn: the request goes on without its cookies.
type storageJar struct {
	store  storage.Storage
	logger *slog.Logger
}

func (j *storageJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	lines := make([]string, 0, len(cookies))
	for _, ck := range cookies {
		lines = append(lines, ck.String())
	}
	if cs, ok := j.store.(storage.CookieStore); ok {
		if err := cs.PutCookies(context.Background(), u, strings.Join(lines, "\n")); err != nil {
			j.logger.Warn("storing cookies", "host", u.Host, "err", err)
		}
		return
	}
	j.store.SetCookies(u, strings.Join(lines, "\n"))
}

func (j *storageJar) Cookies(u *url.URL) []*http.Cookie {
	var s string
	if cs, ok := j.store.(storage.CookieStore); ok {
		var err error
		if s, err = cs.GetCookies(context.Background(), u); err != nil {
			j.logger.Warn("reading cookies", "host", u.Host, "err", err)
		}
	} else {
		s = j.store.Cookies(u)
	}
	var out []*http.Cookie
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		// Attributes kept, as Colly's jar over a Storage keeps them
		// (c.Cookies shows them); a request sends only name=value.
		if ck, err := http.ParseSetCookie(line); err == nil {
			out = append(out, ck)
		}
	}
	return out
}

// fetchStateKey keys the *fetchState in an outgoing request's context, so
// that CheckRedirect knows which crawl request it serves.
type fetchStateKey struct{}

// fetchState follows one fetch through its redirects.
type fetchState struct {
	c     *Collector
	cfg   *config
	req   *Request
	chain []*url.URL
}

// checkRedirect applies to every redirect hop the checks a new request gets:
// URL and domain filters and depth (each hop is one level deeper), then the
// user's redirect handler, then robots.txt with the User-Agent sent and the
// visited check (except for a cycle back through this chain): a hop the
// handler refuses costs no robots.txt fetch and marks nothing visited.
func checkRedirect(next *http.Request, via []*http.Request) error {
	if cfg, ok := next.Context().Value(robotsFetchKey{}).(*config); ok {
		// A robots.txt redirect: RFC 9309 §2.3.1.2 allows five hops, and
		// the crawl's scope (scheme, domains, URL filters) applies as to
		// pages. Not followed, the 3xx itself is the answer, which allows
		// everything, as an unavailable robots.txt does.
		if len(via) > maxRobotsRedirects || cfg.checkURL(next.URL, 0) != nil {
			return http.ErrUseLastResponse
		}
		return nil
	}
	st, _ := next.Context().Value(fetchStateKey{}).(*fetchState)
	if st == nil {
		if len(via) >= 10 {
			return ErrTooManyRedirects
		}
		return nil
	}
	if err := st.check(next, via); err != nil {
		if errors.Is(err, http.ErrUseLastResponse) {
			// The redirect handler's "stop here": http.Client returns the
			// 3xx itself only for this exact value, so it goes back bare.
			return http.ErrUseLastResponse
		}
		//lint:ignore ST1005 Colly's text
		return fmt.Errorf("Not following redirect to %q: %w", next.URL.Redacted(), err)
	}
	return nil
}

func (st *fetchState) check(next *http.Request, via []*http.Request) error {
	if len(via) >= st.cfg.redirectMaxHops {
		return ErrTooManyRedirects
	}
	c, cfg, req := st.c, st.cfg, st.req
	prev := via[len(via)-1]
	depth := req.Depth + len(via)
	if err := cfg.checkURL(next.URL, depth); err != nil {
		return err
	}
	if err := c.checkBlocked(next.URL); err != nil {
		return err
	}
	if !strings.EqualFold(prev.URL.Host, next.URL.Host) {
		// Credentials and explicit cookies belong to the first host; the
		// jar adds the new host's own cookies after this check.
		next.Header.Del("Authorization")
		next.Header.Del("Cookie")
		next.Header.Del("Proxy-Authorization")
	}
	c.shared.redirectMu.RLock()
	h := c.shared.redirectHandler
	c.shared.redirectMu.RUnlock()
	if h != nil {
		if err := h(next, via); err != nil {
			return err
		}
	}
	if next.Method != http.MethodHead {
		if err := c.checkRobots(next.Context(), cfg, next.URL, next.Header.Get("User-Agent")); err != nil {
			return err
		}
	}
	cycle := slices.ContainsFunc(via, func(v *http.Request) bool { return sameURL(v.URL, next.URL, cfg.sortQuery) })
	if req.checkRevisit && !cfg.allowRevisit && !cycle {
		key := urlkey.RequestKey(next.Method, urlkey.Canonical(next.URL, cfg.sortQuery), nil)
		added, err := c.markVisited(next.Context(), key)
		if err != nil {
			return err
		}
		if !added {
			return &AlreadyVisitedError{Destination: next.URL}
		}
		req.redirectKeys = append(req.redirectKeys, key)
	}
	st.chain = append(st.chain, prev.URL)
	return nil
}

func sameURL(a, b *url.URL, sortQuery bool) bool {
	return urlkey.Canonical(a, sortQuery) == urlkey.Canonical(b, sortQuery)
}

// fetched is the raw outcome of one HTTP exchange, before callbacks.
type fetched struct {
	status     int
	statusText string
	header     http.Header
	body       io.ReadCloser
	finalURL   *url.URL
	redirects  []*url.URL
	trace      *HTTPTrace
	proxyURL   string
	latency    time.Duration
	// bodyObeysContext reports that reading body fails once the request's
	// context ends, so that nothing else needs to close it then.
	bodyObeysContext bool
}

// sendContext is the context of one exchange roundTrip sends: the values
// checkRedirect, a ProxyFunc (ProxyURLKey) and a Colly-style redirect
// handler (CheckRevisitKey) read from it, in one allocation rather than a
// context.WithValue each.
type sendContext struct {
	context.Context
	st fetchState
	// proxyURL is the box a ProxyFunc reports the proxy it chose in.
	proxyURL     string
	checkRevisit bool
	// pin is where the request's host was keyed in the gate, if by address.
	pin dialPin
}

func (s *sendContext) Value(key any) any {
	switch key {
	case fetchStateKey{}:
		return &s.st
	case ProxyURLKey:
		return &s.proxyURL
	case CheckRevisitKey:
		return s.checkRevisit
	case dialPinKey{}:
		if s.pin.addr.IsValid() {
			return s.pin
		}
	}
	return s.Context.Value(key)
}

// sendHeader copies h for an outgoing request, as http.Header.Clone does
// (nil values stay nil), and returns with it room for the two values
// roundTrip may add (User-Agent, Accept-Encoding) in the same backing
// array: three allocations where Clone and two Sets make five. net/http, the
// jar and the credential check change the copy, never the Request's own
// Headers.
func sendHeader(h http.Header) (http.Header, []string) {
	n := 0
	for _, v := range h {
		n += len(v)
	}
	vals := make([]string, n, n+2)
	out := make(http.Header, len(h)+2)
	i := 0
	for k, v := range h {
		if v == nil {
			out[k] = nil
			continue
		}
		j := i + copy(vals[i:], v)
		out[k] = vals[i:j:j]
		i = j
	}
	return out, vals[n : n : n+2]
}

// roundTrip sends req and returns the response with its body unread.
func (c *Collector) roundTrip(ctx context.Context, cfg *config, req *Request, method string) (*fetched, error) {
	var body io.Reader
	if req.bodyBytes != nil {
		body = bytes.NewReader(req.bodyBytes)
	} else if req.Body != nil {
		body = req.Body
	}
	sc := &sendContext{Context: ctx, st: fetchState{c: c, cfg: cfg, req: req}, checkRevisit: req.checkRevisit && !cfg.allowRevisit}
	sc.pin, _ = pinOf(req.URL, req.ticket)
	hreq, err := http.NewRequestWithContext(sc, method, req.URL.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	var spare []string
	hreq.Header, spare = sendHeader(*req.Headers)
	if removed := c.shared.creds.strip(req.URL, hreq.Header); removed != nil && c.debugEnabled() {
		c.logger.Debug("credential headers not sent to a host the crawl was not started on", "url", req.URL.Redacted(),
			"request_id", req.ID, "headers", removed)
	}
	if _, ok := hreq.Header["User-Agent"]; !ok {
		spare = append(spare, cfg.userAgent)
		hreq.Header["User-Agent"] = spare[len(spare)-1 : len(spare) : len(spare)]
	}
	if _, ok := hreq.Header["Accept-Encoding"]; !ok {
		spare = append(spare, acceptEncoding)
		hreq.Header["Accept-Encoding"] = spare[len(spare)-1 : len(spare) : len(spare)]
	}
	if req.Host != "" {
		hreq.Host = req.Host
	}
	var trace *HTTPTrace
	if cfg.traceHTTP {
		trace = &HTTPTrace{}
		hreq = trace.WithTrace(hreq)
	}
	start := time.Now()
	if req.ticket.HasGap() {
		hreq = withSentReport(hreq, req.ticket)
	}
	res, std, err := c.doOn(hreq)
	// A transport that reported nothing (not an *http.Transport, or a
	// failed dial) is taken to have reached the server by its return.
	req.ticket.Sent(time.Now())
	f := &fetched{trace: trace, redirects: sc.st.chain, latency: time.Since(start)}
	f.proxyURL = proxyURLFromContext(sc)
	if err != nil {
		return f, err
	}
	final := hreq.URL
	if res.Request != nil {
		f.finalURL = res.Request.URL
		final = f.finalURL
	}
	// net/http's own transport ends an http or https body's reads when the
	// request's context ends; a protocol registered with RegisterProtocol
	// answers with bodies of its own.
	f.bodyObeysContext = std && (final.Scheme == "http" || final.Scheme == "https")
	f.status, f.statusText, f.header, f.body = res.StatusCode, res.Status, res.Header, res.Body
	return f, nil
}

// withSentReport has hreq report to t when the server has seen it, the
// start from which the host's Delay is measured (limits.Ticket.Sent): when
// its headers are written on a connection the server is already reading;
// on a new connection, whose first request the server reads only after its
// accept, or to a host that allows one request at a time, when the first
// response byte arrives, the latest moment the server can have seen it.
func withSentReport(hreq *http.Request, t *limits.Ticket) *http.Request {
	var reused atomic.Bool
	ct := &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused.Store(i.Reused) },
		WroteHeaders: func() {
			if reused.Load() && !t.Serial() {
				t.Sent(time.Now())
			}
		},
		GotFirstResponseByte: func() { t.Sent(time.Now()) },
	}
	return hreq.WithContext(httptrace.WithClientTrace(hreq.Context(), ct))
}

// isTimeout reports network timeouts, for the retry policy.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// maxRobotsSize caps the robots.txt body that is parsed: RFC 9309 §2.5 asks
// for at least 500 KiB, and more may be ignored.
const maxRobotsSize = 500 << 10

// maxRobotsRedirects is how many redirects a robots.txt fetch follows (RFC
// 9309 §2.3.1.2: at least five).
const maxRobotsRedirects = 5

// robotsFetchKey marks a robots.txt fetch's context; its value is the
// crawl's config, whose scope the fetch's redirects obey.
type robotsFetchKey struct{}

// fetchRobots fetches a robots.txt for the robots cache, with the collector's
// client and User-Agent, in its host's turn (see robotsSlot) and outside the
// callbacks.
func (c *Collector) fetchRobots(ctx context.Context, u *url.URL) (status int, body []byte, err error) {
	// A request to the host like any other: it waits for the host's turn
	// and the next request starts Delay after it reached the server.
	t, held, err := c.robotsSlot(ctx, u.Host)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	if !held {
		defer func() { t.Done(limits.Result{StatusCode: status, Latency: time.Since(start), Err: err}) }()
	}
	c.counts.robots.Add(1)
	ctx = context.WithValue(ctx, robotsFetchKey{}, c.config())
	if pin, ok := pinOf(u, t); ok {
		ctx = context.WithValue(ctx, dialPinKey{}, pin)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	hreq.Header.Set("User-Agent", c.UserAgent)
	hreq.Header.Set("Accept-Encoding", acceptEncoding)
	if t.HasGap() {
		hreq = withSentReport(hreq, t)
	}
	res, err := c.do(hreq)
	t.Sent(time.Now())
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, _, err = readBody(res.Body, res.Header, u.Path, maxRobotsSize)
	return res.StatusCode, body, err
}
