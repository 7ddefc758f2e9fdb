package render

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/magpiecrawl/magpie"
)

// Renderer downloads the pages it selects with a headless Chromium, so that
// callbacks see the DOM after scripts ran. It implements magpie.Fetcher and
// magpie.Idler: hand it to a collector with magpie.WithFetcher or
// Collector.SetFetcher.
//
// The browser starts on the first Fetch, not in New, and ends when a crawl
// using the Renderer stops (Wait, Stop: the collector calls Idle) or at
// Close; the next Fetch starts it again. A crashed browser is started again
// by the next Fetch. At most Tabs pages load at once.
//
// A Renderer is safe for concurrent use and may serve several collectors.
// The zero value is not usable; create one with New. Close it when done.
type Renderer struct {
	cfg config
	// slots holds the free tabs; a Fetch takes one for the whole page.
	slots chan *tab
	// lock is a mutex that a Fetch can stop waiting for: a value in it is
	// the lock held. It guards b, gen and closed.
	lock   chan struct{}
	b      *browser
	gen    uint64
	closed bool
}

var (
	_ magpie.Fetcher = (*Renderer)(nil)
	_ magpie.Idler   = (*Renderer)(nil)
)

// New returns a Renderer configured by opts. It finds the browser but does
// not start it. It fails with ErrNoBrowser when no browser is found and with
// ErrInvalidOption for an unusable option.
func New(opts ...Option) (*Renderer, error) {
	cfg := config{tabs: DefaultTabs, timeout: DefaultTimeout, launch: DefaultLaunchTimeout, idle: DefaultNetworkIdle, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	path, err := findBrowser(cfg.path)
	if err != nil {
		return nil, err
	}
	cfg.path = path
	r := &Renderer{cfg: cfg, slots: make(chan *tab, cfg.tabs), lock: make(chan struct{}, 1)}
	for range cfg.tabs {
		r.slots <- &tab{}
	}
	return r, nil
}

// browserNames are the executables looked for on PATH, in order.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser returns the browser executable: path if given, else the first
// of browserNames on PATH.
func findBrowser(path string) (string, error) {
	if path != "" {
		if st, err := os.Stat(path); err != nil || st.IsDir() {
			return "", fmt.Errorf("%w: %s", ErrNoBrowser, path)
		}
		return path, nil
	}
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w on PATH (looked for %v)", ErrNoBrowser, browserNames)
}

// markKey is the Context key Mark sets; its value is the marked URL.
const markKey = "magpie.render.mark"

// Mark makes req rendered whatever the rules say; call it in OnRequest (or
// on a request built with Collector.Request). The mark is kept in req.Ctx for
// req's URL only: the requests its callbacks make, which get a copy of the
// Context, are not marked by it.
func Mark(req *magpie.Request) {
	if req == nil || req.Ctx == nil || req.URL == nil {
		return
	}
	req.Ctx.Put(markKey, req.URL.String())
}

// Selects reports whether req is rendered: a GET request marked with Mark, or
// whose URL satisfies the rules (All; Match and Hosts).
func (r *Renderer) Selects(req *magpie.Request) bool {
	if req == nil || req.URL == nil || (req.Method != "" && req.Method != http.MethodGet) {
		return false
	}
	if req.Ctx != nil && req.Ctx.Get(markKey) == req.URL.String() {
		return true
	}
	if r.cfg.all {
		return true
	}
	if len(r.cfg.patterns) == 0 && len(r.cfg.hosts) == 0 {
		return false
	}
	if len(r.cfg.hosts) > 0 && !matchHost(r.cfg, req.URL.Hostname()) {
		return false
	}
	if len(r.cfg.patterns) > 0 {
		s := req.URL.String()
		for _, re := range r.cfg.patterns {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	return true
}

func matchHost(cfg config, host string) bool {
	for _, g := range cfg.hosts {
		if g.Match(host) {
			return true
		}
	}
	return false
}

// Fetch loads fr's URL in a tab of the browser, starting the browser if it
// is not running, and returns the DOM after scripts ran
// (document.documentElement.outerHTML, as UTF-8 text/html) with the main
// document's status and headers, its final URL and the browser's cookies for
// it. A main document that is not HTML (JSON, an image) comes back as
// received. It waits for a free tab as long as ctx allows. Errors:
// ErrTimeout, ErrBrowserCrashed, ErrNavigation, ErrLaunch, ErrClosed, or
// ctx's error when ctx ended first.
func (r *Renderer) Fetch(ctx context.Context, fr *magpie.FetchRequest) (*magpie.FetchResult, error) {
	var t *tab
	select {
	case t = <-r.slots:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { r.slots <- t }()
	b, err := r.browser(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.ready(ctx, b); err != nil {
		return nil, r.classify(ctx, b, nil, err, "opening a tab")
	}
	start := time.Now()
	res, err := r.load(ctx, b, t, fr)
	if err != nil {
		// The page may still be loading or running: a new tab serves the
		// next page.
		t.close()
		r.cfg.logger.Debug("page failed", "url", fr.URL.String(), "request_id", fr.RequestID,
			"duration", time.Since(start), "err", err)
		return nil, err
	}
	r.cfg.logger.Debug("page rendered", "url", res.FinalURL.String(), "request_id", fr.RequestID, "status", res.StatusCode,
		"duration", time.Since(start))
	return res, nil
}

// Idle ends the browser and its tabs; the next Fetch starts a new one. The
// collector calls it when a crawl that used the Renderer stops. A Fetch in
// progress fails with ErrClosed.
func (r *Renderer) Idle() {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.shutBrowser()
}

// Close ends the browser, waiting for its processes to exit and its
// temporary profile to be removed; later Fetches fail with ErrClosed. It is
// idempotent and always returns nil.
func (r *Renderer) Close() error {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.closed = true
	r.shutBrowser()
	return nil
}

// shutBrowser ends the current browser; called with the lock held.
func (r *Renderer) shutBrowser() {
	if r.b == nil {
		return
	}
	b := r.b
	r.b = nil
	b.shut()
	r.cfg.logger.Info("browser stopped", "pid", b.pid)
}

// browser returns the running browser, starting one if there is none or the
// last one died.
func (r *Renderer) browser(ctx context.Context) (*browser, error) {
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.lock }()
	if r.closed {
		return nil, ErrClosed
	}
	if r.b != nil && r.b.alive() {
		return r.b, nil
	}
	if r.b != nil {
		r.cfg.logger.Warn("browser died; starting a new one", "pid", r.b.pid)
		r.shutBrowser()
	}
	r.gen++
	b, err := launch(ctx, &r.cfg, r.gen)
	if err != nil {
		return nil, err
	}
	r.b = b
	r.cfg.logger.Info("browser started", "pid", b.pid, "path", r.cfg.path)
	return b, nil
}

// classify turns the failure of a step of a page into the package's errors.
func (r *Renderer) classify(ctx context.Context, b *browser, pctx context.Context, err error, step string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b.closing.Load() {
		return fmt.Errorf("%w (%s)", ErrClosed, step)
	}
	if b.lost(err) {
		return fmt.Errorf("%w (%s): %w", ErrBrowserCrashed, step, err)
	}
	if pctx != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w after %v (%s): %w", ErrTimeout, r.cfg.timeout, step, context.DeadlineExceeded)
	}
	return fmt.Errorf("render: %s: %w", step, err)
}
