package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// slowBrowser writes a browser executable that waits delay before it starts
// the real browser, as Chromium does on a loaded machine; from a minute on,
// it never starts it.
func slowBrowser(t *testing.T, delay time.Duration) string {
	t.Helper()
	requireChromium(t)
	real, err := findBrowser("")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "slow-chromium")
	script := fmt.Sprintf("#!/bin/sh\nsleep %.1f\nexec %q \"$@\"\n", delay.Seconds(), real)
	if delay >= time.Minute {
		// Never starts: the process is the sleep itself, so that ending
		// it leaves nothing behind.
		script = fmt.Sprintf("#!/bin/sh\nexec sleep %.0f\n", delay.Seconds())
	}
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLaunchTimeout: the browser's start has its own bound. A browser that
// takes longer to start than a page's Timeout still renders the page (the
// start is not counted in it), and LaunchTimeout fails a start that takes
// too long with ErrLaunch, naming the option.
func TestLaunchTimeout(t *testing.T) {
	s := newSite(t)
	t.Run("slow start", func(t *testing.T) {
		const pageTimeout = 4 * time.Second
		path := slowBrowser(t, pageTimeout+time.Second)
		r, _ := newRenderer(t, BrowserPath(path), Match(`/js/`), Timeout(pageTimeout), NetworkIdle(0))
		cr := newCrawler(r, magpie.MaxDepth(1))
		cr.crawl(t, s.URL+"/js/p1")
		if errs := cr.errs.get("/js/p1"); len(errs) != 0 {
			t.Fatalf("OnError for /js/p1 = %v, want none (the start is not the page's time)", errs)
		}
		body, ok := cr.page("/js/p1")
		if !ok || !strings.Contains(body, "/plain/from1") {
			t.Errorf("/js/p1 rendered = %v, body has the script's link = %v; want both", ok, strings.Contains(body, "/plain/from1"))
		}
	})
	t.Run("bound", func(t *testing.T) {
		path := slowBrowser(t, time.Minute)
		r, _ := newRenderer(t, BrowserPath(path), Match(`/js/`), LaunchTimeout(200*time.Millisecond))
		cr := newCrawler(r, magpie.MaxDepth(1))
		cr.crawl(t, s.URL+"/js/p2")
		errs := cr.errs.get("/js/p2")
		if len(errs) != 1 || !errors.Is(errs[0], ErrLaunch) || !strings.Contains(errs[0].Error(), "LaunchTimeout") {
			t.Fatalf("OnError for /js/p2 = %v, want one ErrLaunch naming LaunchTimeout", errs)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		if _, err := New(LaunchTimeout(0)); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(LaunchTimeout(0)) error = %v, want ErrInvalidOption", err)
		}
	})
}
