package render

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"
)

// closeGrace bounds the graceful close of a browser before it is killed.
const closeGrace = 5 * time.Second

// lostWait bounds how long a failed command waits to learn whether the
// browser's connection dropped (the command's error and the drop race).
const lostWait = time.Second

// browser is one browser process.
type browser struct {
	gen uint64
	pid int
	// ctx is chromedp's handle on the browser (its commands and tabs hang
	// from it), not the scope of a request: it lives as long as the process.
	ctx    context.Context
	cancel context.CancelFunc
	// allocCancel kills the process if it still runs and waits until it
	// and its temporary profile are gone.
	allocCancel context.CancelFunc
	// lostConn is closed when the connection to the process drops.
	lostConn <-chan struct{}
	// closing is set when the browser is being ended on purpose.
	closing atomic.Bool
}

// flags returns the allocator options: chromedp's defaults, the flags the
// crawl needs on a machine without network access beyond its targets, and
// the user's.
func flags(cfg *config) []chromedp.ExecAllocatorOption {
	opts := slices.Clone(chromedp.DefaultExecAllocatorOptions[:])
	opts = append(opts,
		chromedp.ExecPath(cfg.path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("mute-audio", true),
	)
	names := make([]string, 0, len(cfg.flags))
	for name := range cfg.flags {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		opts = append(opts, chromedp.Flag(name, cfg.flags[name]))
	}
	return opts
}

// launch starts a browser. chromedp makes the temporary profile and removes
// it when the process ends. ctx and the launch timeout (not the page's)
// bound the start only.
func launch(ctx context.Context, cfg *config, gen uint64) (*browser, error) {
	actx, acancel := chromedp.NewExecAllocator(context.Background(), flags(cfg)...)
	bctx, bcancel := chromedp.NewContext(actx)
	sctx, scancel := context.WithTimeout(ctx, cfg.launch)
	defer scancel()
	// A start cut short ends the browser: the first Run binds the browser's
	// life to the context it is given, so that must be bctx itself.
	stop := context.AfterFunc(sctx, bcancel)
	err := chromedp.Do(bctx)
	if !stop() && err == nil {
		err = sctx.Err()
	}
	if err != nil {
		bcancel()
		acancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(sctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w (%s): not started within %v (LaunchTimeout): %w", ErrLaunch, cfg.path, cfg.launch, err)
		}
		return nil, fmt.Errorf("%w (%s): %w", ErrLaunch, cfg.path, err)
	}
	c := chromedp.FromContext(bctx)
	b := &browser{gen: gen, ctx: bctx, cancel: bcancel, allocCancel: acancel, lostConn: c.Browser.LostConnection}
	if p := c.Browser.Process(); p != nil {
		b.pid = p.Pid
	}
	return b, nil
}

// alive reports whether the browser is still connected.
func (b *browser) alive() bool {
	if b.ctx.Err() != nil {
		return false
	}
	select {
	case <-b.lostConn:
		return false
	default:
		return true
	}
}

// lost reports whether err came from the browser going away: its
// connection dropped or its context ended. A command's error may arrive
// just before the drop is seen, so an error that looks like a drop waits a
// moment for it.
func (b *browser) lost(err error) bool {
	if !b.alive() {
		return true
	}
	if !errors.Is(err, chromedp.ErrChannelClosed) && !errors.Is(err, chromedp.ErrTargetDetached) &&
		!errors.Is(err, context.Canceled) {
		return false
	}
	t := time.NewTimer(lostWait)
	defer t.Stop()
	select {
	case <-b.lostConn:
		return true
	case <-b.ctx.Done():
		return true
	case <-t.C:
		return false
	}
}

// shut ends the browser: a graceful close, then a kill, and waits until the
// process tree and the temporary profile are gone.
func (b *browser) shut() {
	b.closing.Store(true)
	if b.alive() {
		cctx, ccancel := context.WithTimeout(b.ctx, closeGrace)
		_ = chromedp.Cancel(cctx)
		ccancel()
	}
	b.cancel()
	b.allocCancel()
}

// tab is one slot of the pool: a tab in its own browser context (its own
// cookies and cache), reused from page to page until it fails or its browser
// ends.
type tab struct {
	gen    uint64
	ctx    context.Context // chromedp's handle on the tab, like browser.ctx
	cancel context.CancelFunc
}

// ready makes sure t is an open tab of b.
func (t *tab) ready(ctx context.Context, b *browser) error {
	if t.ctx != nil && t.gen == b.gen && t.ctx.Err() == nil {
		return nil
	}
	t.close()
	tctx, tcancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	stop := context.AfterFunc(ctx, tcancel)
	err := chromedp.Do(tctx)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		tcancel()
		return err
	}
	t.gen, t.ctx, t.cancel = b.gen, tctx, tcancel
	return nil
}

// close closes the tab, if open.
func (t *tab) close() {
	if t.cancel != nil {
		t.cancel()
	}
	t.ctx, t.cancel = nil, nil
}
