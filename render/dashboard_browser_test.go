package render

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/dashboard"
)

// The live page (package dashboard) driven by headless Chromium: a crawl
// of a local site with a slow host, a host that answers 429 and broken
// links, watched and steered from the page. Every wait is on a DOM
// condition (chromedp.Poll) or a channel, with a deadline.

// watchedSite is the crawl's three hosts: main, whose pages form a chain
// long enough to outlast the test and whose / links to a broken page, to
// slow and to busy; slow, whose pages take 250 ms; busy, which always
// answers 429. hits counts main's and slow's requests; arrived hears of
// each.
type watchedSite struct {
	main, slow, busy *httptest.Server
	hits             atomic.Int64
	arrived          chan struct{}
}

func newWatchedSite(t *testing.T) *watchedSite {
	s := &watchedSite{arrived: make(chan struct{}, 1)}
	count := func() {
		s.hits.Add(1)
		select {
		case s.arrived <- struct{}{}:
		default:
		}
	}
	s.slow = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		count()
		select { // the host's latency, not synchronisation
		case <-time.After(250 * time.Millisecond):
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "<html><title>slow</title></html>")
	}))
	s.busy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	s.main = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		count()
		w.Header().Set("Content-Type", "text/html")
		switch {
		case r.URL.Path == "/":
			fmt.Fprintf(w, `<a href="/p/0">chain</a><a href="/broken">broken</a><a href="%s/busy">busy</a>`, s.busy.URL)
			for i := range 4 {
				fmt.Fprintf(w, `<a href="%s/s/%d">slow</a>`, s.slow.URL, i)
			}
		case strings.HasPrefix(r.URL.Path, "/p/"):
			i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
			fmt.Fprintf(w, `<a href="/p/%d">next</a><a href="/p/%d">next</a>`, i+1, i+2)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		s.main.Close()
		s.slow.Close()
		s.busy.Close()
	})
	return s
}

// browserTab starts headless Chromium and returns a tab's context; the
// browser ends at cleanup.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	requireChromium(t)
	path, err := findBrowser("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel()
		if n := browserProcs(dir); n != 0 {
			t.Errorf("%d browser processes left", n)
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// poll waits, at most a minute, until the page's expression is truthy,
// and returns its value.
func poll[T any](t *testing.T, ctx context.Context, what, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
	return v
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func TestDashboardInBrowser(t *testing.T) {
	s := newWatchedSite(t)
	c := magpie.NewCollector(magpie.Async(), magpie.BusyRetries(1),
		magpie.AllowedDomains("127.0.0.1"))
	// The chain is crawled at a pace the test can watch.
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 2, Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	page := dashboard.New(c)
	srv := httptest.NewServer(page)
	t.Cleanup(func() {
		_ = page.Close()
		srv.Close()
	})
	ctx := browserTab(t)
	if err := c.Visit(s.main.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}

	slowHost := strings.TrimPrefix(s.slow.URL, "http://")
	// The slow host leads the hosts table once its pages are done.
	poll[bool](t, ctx, "the slow host first", fmt.Sprintf(
		`(() => { const r = document.querySelector("#hosts tbody tr"); return !!r && r.dataset.host === %q && Number(r.cells[3].textContent) >= 4 })()`, slowHost))
	// A broken link shows with the page that linked to it.
	poll[bool](t, ctx, "the broken link's referrer", fmt.Sprintf(
		`[...document.querySelectorAll("#failures tbody tr")].some(r => r.querySelector("td.url").textContent === %q && r.querySelector("td.referrer").textContent === %q && r.querySelector("td.status").textContent === "404")`,
		s.main.URL+"/broken", s.main.URL+"/"))
	// The busy host's 429 shows once its one retry is spent.
	poll[bool](t, ctx, "the 429 failure", fmt.Sprintf(
		`[...document.querySelectorAll("#failures tbody tr")].some(r => r.querySelector("td.url").textContent === %q && r.querySelector("td.status").textContent === "429")`,
		s.busy.URL+"/busy"))
	// The chart has points.
	poll[bool](t, ctx, "chart points", `Number(document.getElementById("chart-pages").dataset.points) >= 3`)

	shoot(t, ctx)

	// Pause: the badge says so, what was in flight finishes, and then the
	// server gets no request while two more snapshots arrive.
	if err := chromedp.Do(ctx, chromedp.Click("#btn-pause")); err != nil {
		t.Fatal(err)
	}
	poll[bool](t, ctx, "paused", `document.getElementById("state").textContent === "paused"`)
	// Two snapshots (a second or more) for the requests in flight to end:
	// the chain's are quick, the slow host's are done.
	nextSnapshots(t, ctx, 2)
	held := s.hits.Load()
	nextSnapshots(t, ctx, 2)
	if got := s.hits.Load(); got != held {
		t.Fatalf("the server got %d requests while paused", got-held)
	}
	// The totals match Stats (nothing moves while paused).
	st := c.Stats()
	pages := eval[string](t, ctx, `document.getElementById("total-pages").textContent`)
	failed := eval[string](t, ctx, `document.getElementById("total-failed").textContent`)
	var nf uint64
	for _, n := range st.Failed {
		nf += n
	}
	if want := commas(uint64(st.Responses)); pages != want {
		t.Errorf("pages shown %q, Stats().Responses %s", pages, want)
	}
	if want := commas(nf); failed != want || nf < 2 {
		t.Errorf("failed shown %q, Stats().Failed %v", failed, st.Failed)
	}
	if !st.Paused {
		t.Error("Stats().Paused is false after the page's Pause")
	}

	// Resume: requests reach the server again.
	select {
	case <-s.arrived: // drop a value left from before the pause
	default:
	}
	if err := chromedp.Do(ctx, chromedp.Click("#btn-resume")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.arrived:
	case <-time.After(time.Minute):
		t.Fatal("no request after Resume")
	}
	if s.hits.Load() <= held {
		t.Fatal("no request counted after Resume")
	}
	poll[bool](t, ctx, "running", `document.getElementById("state").textContent === "running"`)

	// Stop (the confirmation accepted): the crawl ends, Wait returns.
	waited := make(chan struct{})
	go func() {
		c.Wait()
		close(waited)
	}()
	eval[any](t, ctx, `window.confirm = () => true, null`)
	if err := chromedp.Do(ctx, chromedp.Click("#btn-stop")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("Wait did not return after Stop")
	}
	poll[bool](t, ctx, "idle", `document.getElementById("state").textContent === "idle"`)
	if got := c.Stats().Pending; got != 0 {
		t.Errorf("Stats().Pending = %d after Stop", got)
	}
}

// nextSnapshots waits until the page has shown n more snapshots.
func nextSnapshots(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	seen := eval[string](t, ctx, `document.body.dataset.updated`)
	for range n {
		poll[bool](t, ctx, "a snapshot", fmt.Sprintf(`document.body.dataset.updated !== %q`, seen))
		seen = eval[string](t, ctx, `document.body.dataset.updated`)
	}
}

// commas writes n as the page does (en-US grouping).
func commas(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// shoot saves the page at 1280 and 390 px wide into
// $MAGPIE_SCREENSHOTS (docs/screenshots.sh sets it), if set.
func shoot(t *testing.T, ctx context.Context) {
	t.Helper()
	dir := os.Getenv("MAGPIE_SCREENSHOTS")
	if dir == "" {
		return
	}
	for _, w := range []int64{1280, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		// Redrawn at the new width by the next snapshot.
		nextSnapshots(t, ctx, 1)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("dashboard-%d.png", w)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
}
