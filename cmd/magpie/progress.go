package main

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/magpiecrawl/magpie"
)

// tally counts pages, failures (requests sent that failed: OnError) and
// skips (requests refused before sending: OnRefused), each by kind. A skip
// counts a URL once per kind, however many links lead to it: a page that
// robots.txt blocks, linked from every page of a site, is one. Safe for
// concurrent use.
type tally struct {
	// mu guards everything below.
	mu      sync.Mutex
	pages   int
	failed  map[string]int
	skipped map[string]int
	// skippedURLs holds, by kind, the hashes of the URLs skipped (see
	// urlHash): 8 bytes a URL rather than the URL.
	skippedURLs map[string]map[uint64]struct{}
	visited     int // links to pages already crawled or queued: not refusals
	// interrupted counts requests in flight when the crawl stopped (Ctrl-C,
	// --max-duration): not failures of the site.
	interrupted int
}

func (t *tally) page() {
	t.mu.Lock()
	t.pages++
	t.mu.Unlock()
}

// fail counts a request that was sent and failed.
func (t *tally) fail(kind string) { t.add(&t.failed, kind) }

// interrupt counts a request cut short by the crawl's stop.
func (t *tally) interrupt() {
	t.mu.Lock()
	t.interrupted++
	t.mu.Unlock()
}

// interruptions returns how many requests the crawl's stop cut short.
func (t *tally) interruptions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.interrupted
}

// skip counts the URL u refused before it was sent, once per kind; it
// reports whether u is new to kind.
func (t *tally) skip(kind, u string) bool {
	h := urlHash(u)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.skippedURLs == nil {
		t.skippedURLs = map[string]map[uint64]struct{}{}
	}
	seen := t.skippedURLs[kind]
	if seen == nil {
		seen = map[uint64]struct{}{}
		t.skippedURLs[kind] = seen
	}
	if _, dup := seen[h]; dup {
		return false
	}
	seen[h] = struct{}{}
	if t.skipped == nil {
		t.skipped = map[string]int{}
	}
	t.skipped[kind]++
	return true
}

// refused counts a request OnRefused was told of: a link to a page already
// visited apart from the refusals. It returns the refusal's kind, and
// whether its URL is new to that kind ("" and false for a visited page).
func (t *tally) refused(r *magpie.Request, err error) (kind string, first bool) {
	if _, ok := errors.AsType[*magpie.AlreadyVisitedError](err); ok {
		t.mu.Lock()
		t.visited++
		t.mu.Unlock()
		return "", false
	}
	kind = skipKind(err)
	u := ""
	if r != nil && r.URL != nil {
		u = r.URL.String()
	}
	return kind, t.skip(kind, u)
}

// urlSeed keys urlHash for this process.
var urlSeed = maphash.MakeSeed()

// urlHash identifies the URL u, its fragment left out (a link to
// /page#top is one to /page), by a 64-bit hash: colliding URLs are
// counted once, a chance of about n²/2⁶⁵ among n URLs.
func urlHash(u string) uint64 {
	u, _, _ = strings.Cut(u, "#")
	return maphash.String(urlSeed, u)
}

func (t *tally) add(m *map[string]int, kind string) {
	t.mu.Lock()
	if *m == nil {
		*m = make(map[string]int)
	}
	(*m)[kind]++
	t.mu.Unlock()
}

// counts is a snapshot of a tally.
type counts struct {
	pages           int
	failed, skipped map[string]int
	visited         int
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (t *tally) snapshot() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return counts{pages: t.pages, failed: clone(t.failed), skipped: clone(t.skipped), visited: t.visited}
}

func clone(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return maps.Clone(m)
}

// isTimeout reports a network timeout.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// skipKind names a refusal for the summary.
func skipKind(err error) string {
	if _, ok := errors.AsType[*magpie.AlreadyVisitedError](err); ok {
		return "already visited (skipped)"
	}
	switch {
	case errors.Is(err, magpie.ErrPrivateNetwork):
		return "private network (refused)"
	case errors.Is(err, magpie.ErrForbiddenDomain), errors.Is(err, magpie.ErrNoURLFiltersMatch):
		return "out of scope (skipped)"
	case errors.Is(err, magpie.ErrForbiddenURL):
		return "excluded (skipped)"
	case errors.Is(err, magpie.ErrRobotsTxtBlocked):
		return "blocked by robots.txt"
	case errors.Is(err, magpie.ErrRobotsTxtUnavailable):
		return "robots.txt unreachable"
	case errors.Is(err, magpie.ErrMaxDepth):
		return "too deep (skipped)"
	case errors.Is(err, magpie.ErrMaxRequests):
		return "over --max-pages (skipped)"
	case errors.Is(err, magpie.ErrMaxRequestsPerHost):
		return "over --max-pages-per-host (skipped)"
	case errors.Is(err, magpie.ErrUnsupportedScheme):
		return "not http (skipped)"
	case errors.Is(err, magpie.ErrStopped), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	default:
		return "other (skipped)"
	}
}

// progressLine formats one progress report to fit in width columns (0: no
// limit): the least useful parts are left out first, and what still does not
// fit is cut. st, when known, gives the requests queued and those waiting
// (the longest wait is named: why the crawl seems to stand still).
func progressLine(c counts, st *magpie.Stats, elapsed time.Duration, width int) string {
	secs := elapsed.Seconds()
	parts := []string{
		fmt.Sprintf("%d pages", c.pages),
		"", // waiting, when any
		fmt.Sprintf("%d failed", total(c.failed)),
		"", // queued, when known
		fmt.Sprintf("%d skipped", total(c.skipped)),
		fmt.Sprintf("%.1f pages/s", float64(c.pages)/max(secs, 1e-9)),
		fmt.Sprintf("%.0fs", secs),
	}
	if st != nil {
		parts[1] = waitingPart(st)
		parts[3] = fmt.Sprintf("%d queued", st.Pending)
	}
	parts = slices.DeleteFunc(parts, func(s string) bool { return s == "" })
	line := "  " + strings.Join(parts, "  ")
	if width <= 0 {
		return line
	}
	// The cursor must not reach the last column: some terminals wrap there.
	for len(parts) > 1 && len(line) > width-1 {
		parts = parts[:len(parts)-1]
		line = "  " + strings.Join(parts, "  ")
	}
	if len(line) > width-1 {
		line = line[:max(width-1, 0)]
	}
	return line
}

// waitingPart is the progress line's account of the requests waiting, the
// longest wait named: "1 waiting: Retry-After, 118 s, /busy"; "" when none.
func waitingPart(st *magpie.Stats) string {
	if st.Waiting == 0 || len(st.Waits) == 0 {
		return ""
	}
	w := st.Waits[0]
	return fmt.Sprintf("%d waiting: %s, %s, %s", st.Waiting, w.Reason, secondsLeft(w.Until), shortURL(w.URL))
}

// secondsLeft is the time until t in whole seconds, rounded up: "118 s".
func secondsLeft(t time.Time) string {
	return fmt.Sprintf("%d s", int64(math.Ceil(max(time.Until(t), 0).Seconds())))
}

// shortURL is u's path and query, for a line that must stay short.
func shortURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.RequestURI()
}

// progress writes a report every interval until ctx is done. live means w
// is a terminal of width() columns: the report is one line rewritten in
// place. Otherwise (a pipe, a log file) each report is a line of its own,
// without carriage returns. stats, when set, reports the requests queued
// and waiting; nil means unknown.
func progress(ctx context.Context, w io.Writer, t *tally, started time.Time, interval time.Duration, live bool, width func() int, stats func() magpie.Stats) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	wrote := false
	for {
		select {
		case <-ctx.Done():
			if live && wrote {
				fmt.Fprint(w, "\r\x1b[K") // leave the summary a clean line
			}
			return
		case <-tick.C:
			var st *magpie.Stats
			if stats != nil {
				s := stats()
				st = &s
			}
			if live {
				fmt.Fprintf(w, "\r%s\x1b[K", progressLine(t.snapshot(), st, time.Since(started), width()))
			} else {
				fmt.Fprintln(w, progressLine(t.snapshot(), st, time.Since(started), 0))
			}
			wrote = true
		}
	}
}

// terminal reports whether w is a terminal (an *os.File, or a liveLine), and
// a function that returns its width in columns (80 when the size cannot be
// read).
func terminal(w io.Writer) (bool, func() int) {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, nil
	}
	return true, func() int {
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil || cols <= 0 {
			return 80
		}
		return cols
	}
}

// startProgress runs progress on its own goroutine, unless quiet, with a
// live line on a terminal and a line every 5 s elsewhere. The returned
// function stops it and waits for it.
func startProgress(w io.Writer, t *tally, began time.Time, quiet bool, liveEvery time.Duration, stats func() magpie.Stats) (stop func()) {
	if quiet {
		return func() {}
	}
	live, width := terminal(w)
	every := 5 * time.Second
	if live {
		every = liveEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { progress(ctx, w, t, began, every, live, width, stats) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// waitsEvery is how often -v looks for requests that began to wait.
const waitsEvery = 200 * time.Millisecond

// watchWaits names each request that begins to wait (a Retry-After, a
// back-off, robots.txt) on a -v line, once per wait, until stop is called;
// it does nothing without -v. stop waits for its goroutine.
func watchWaits(stats func() magpie.Stats, fl *failures) (stop func()) {
	if fl == nil || fl.verbose == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(waitsEvery)
		defer tick.Stop()
		told := map[string]time.Time{} // URL → the Until of the wait told
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			st := stats()
			now := map[string]time.Time{}
			for _, w := range st.Waits {
				now[w.URL] = w.Until
				if until, ok := told[w.URL]; !ok || !until.Equal(w.Until) {
					fl.waiting(w)
				}
			}
			told = now
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// summary writes the end-of-crawl report: pages, then the failures and the
// skips by kind.
func summary(w io.Writer, t *tally, elapsed time.Duration, retries uint64) {
	c := t.snapshot()
	fmt.Fprintf(w, "crawled %s in %.2fs (%s pages/s)", plural(c.pages, "page", "pages"), elapsed.Seconds(), rate(c.pages, elapsed))
	if retries > 0 {
		fmt.Fprintf(w, ", %s", plural(int(retries), "retry", "retries"))
	}
	fmt.Fprintln(w)
	for _, sec := range []struct {
		title string
		m     map[string]int
	}{{"failed", c.failed}, {"skipped", c.skipped}} {
		if len(sec.m) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: %d\n", sec.title, total(sec.m))
		for _, k := range slices.Sorted(maps.Keys(sec.m)) {
			fmt.Fprintf(w, "  %-28s %d\n", k, sec.m[k])
		}
	}
	if c.visited > 0 {
		fmt.Fprintf(w, "already visited: %s (not fetched again)\n", plural(c.visited, "link", "links"))
	}
}

// rate is pages per second over elapsed, a whole number, but with a
// decimal below 1 (0.4) and two below 0.1 (0.02), where a whole number
// would say 0.
func rate(pages int, elapsed time.Duration) string {
	r := float64(pages) / max(elapsed.Seconds(), 1e-9)
	switch {
	case r == 0 || r >= 1:
		return fmt.Sprintf("%.0f", r)
	case r >= 0.095:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

// plural is n and the noun: "1 link", "2 links".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
