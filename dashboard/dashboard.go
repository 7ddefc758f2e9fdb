// Package dashboard serves a live page for a running magpie crawl: totals,
// charts of pages and failures per second over the last hour, the hosts
// (slowest first), the latest failures with the page that linked to each,
// the frontier's head, and buttons to pause, resume, stop, block a host and
// add a URL. The page's data is a JSON API that scripts can use as well.
//
//	c := magpie.NewCollector(magpie.Async())
//	d := dashboard.New(c)
//	defer d.Close()
//	srv := &http.Server{Addr: "127.0.0.1:7070", Handler: d}
//	go srv.ListenAndServe()
//	c.Visit("https://example.com/")
//	c.Wait()
//
// Every asset is embedded: the page needs no network beyond the handler.
//
// # API
//
//	GET  /api/stats     the collector's Stats, as JSON
//	GET  /api/events    Server-Sent Events: a Snapshot a second
//	GET  /api/series    the chart points of the last hour, one a second
//	GET  /api/hosts     HostReports, slowest first (?n=, default 100)
//	GET  /api/failures  RecentFailures, newest first
//	GET  /api/frontier  FrontierHead (?n=, default 20)
//	POST /api/pause, /api/resume, /api/stop
//	POST /api/block     host=HOST[:PORT]
//	POST /api/add       url=URL
//
// # Safety
//
// Without a token (Token), the handler answers only requests whose Host
// header names a loopback address (localhost, 127.0.0.0/8, ::1), so that a
// web page elsewhere cannot reach it by rebinding a name to 127.0.0.1:
// serve it on a loopback address. With a token, every request must carry
// it (the X-Magpie-Token header, a Bearer Authorization, or ?token= in the
// URL, which the page passes on); a wrong or missing one gets 403. Every
// POST must also come from the page's own origin: a browser's cross-site
// POST (told by Sec-Fetch-Site or Origin) gets 403 and does nothing
// (net/http's CrossOriginProtection). URLs are shown with their passwords
// redacted, as the logs print them.
//
// The handler costs one goroutine that samples Stats once a second, and
// work only while somebody asks; Close stops it.
package dashboard

import (
	"crypto/subtle"
	"embed"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie"
)

//go:embed static
var static embed.FS

// Handler is the live page and its API for one collector. Create it with
// New; it is safe for concurrent use. Its owner must Close it.
type Handler struct {
	c       *magpie.Collector
	token   string
	onStop  func() error
	samples *sampler
	mux     http.Handler
	// tick is the sampling period: a second, shorter in tests.
	tick time.Duration

	// closeOnce closes closed, which ends the event streams and the
	// sampler; wg counts the sampler.
	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

// Option configures a Handler.
type Option func(*Handler)

// Token makes the handler require tok on every request (see the package
// doc); "" (the default) requires none, and the handler then answers only
// requests addressed to a loopback host.
func Token(tok string) Option { return func(h *Handler) { h.token = tok } }

// OnStop sets what POST /api/stop does; the default is the collector's
// Stop. A program that must finish its output when the crawl ends (close
// files, as on Ctrl-C) passes its own.
func OnStop(f func() error) Option { return func(h *Handler) { h.onStop = f } }

// New returns the handler for c and starts its sampler, which reads
// c.Stats once a second until Close.
func New(c *magpie.Collector, opts ...Option) *Handler {
	h := &Handler{c: c, closed: make(chan struct{}), tick: time.Second}
	h.onStop = c.Stop
	for _, o := range opts {
		o(h)
	}
	h.samples = newSampler(c, h.tick)
	h.wg.Go(func() { h.samples.run(h.closed) })
	h.mux = h.routes()
	return h
}

// Close stops the sampler and ends the event streams; it returns once the
// sampler has exited. The handler then answers 503. Idempotent.
func (h *Handler) Close() error {
	h.closeOnce.Do(func() { close(h.closed) })
	h.wg.Wait()
	return nil
}

// ServeHTTP serves the page and the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-h.closed:
		http.Error(w, "dashboard closed", http.StatusServiceUnavailable)
		return
	default:
	}
	if !h.allowed(r) {
		http.Error(w, "forbidden: missing or wrong token", http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// allowed checks the token, or without one that the request was addressed
// to a loopback host.
func (h *Handler) allowed(r *http.Request) bool {
	if h.token == "" {
		return loopbackHost(r.Host)
	}
	got := r.Header.Get("X-Magpie-Token")
	if got == "" {
		got, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if got == "" {
		got = r.URL.Query().Get("token")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(h.token)) == 1
}

// loopbackHost reports whether hostport (a Host header) names a loopback
// address or localhost.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// routes builds the page's mux: GETs, and POSTs behind the cross-origin
// check.
func (h *Handler) routes() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	mux.Handle("GET /", http.FileServerFS(sub))
	mux.HandleFunc("GET /api/stats", h.getStats)
	mux.HandleFunc("GET /api/events", h.events)
	mux.HandleFunc("GET /api/series", h.getSeries)
	mux.HandleFunc("GET /api/hosts", h.getHosts)
	mux.HandleFunc("GET /api/failures", h.getFailures)
	mux.HandleFunc("GET /api/frontier", h.getFrontier)
	mux.HandleFunc("POST /api/pause", h.pause)
	mux.HandleFunc("POST /api/resume", h.resume)
	mux.HandleFunc("POST /api/stop", h.stop)
	mux.HandleFunc("POST /api/block", h.block)
	mux.HandleFunc("POST /api/add", h.add)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	return cop.Handler(mux)
}
