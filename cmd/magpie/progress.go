package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/magpiecrawl/magpie"
)

// tally counts pages, failures (requests sent that failed: OnError) and
// skips (requests refused before sending: OnRefused), each by kind. Safe for
// concurrent use.
type tally struct {
	// mu guards everything below.
	mu      sync.Mutex
	pages   int
	failed  map[string]int
	skipped map[string]int
	visited int // links to pages already crawled or queued: not refusals
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

// skip counts a request refused before it was sent.
func (t *tally) skip(kind string) { t.add(&t.skipped, kind) }

// refused counts a request OnRefused was told of: a link to a page already
// visited apart from the refusals.
func (t *tally) refused(err error) {
	if _, ok := errors.AsType[*magpie.AlreadyVisitedError](err); ok {
		t.mu.Lock()
		t.visited++
		t.mu.Unlock()
		return
	}
	t.skip(skipKind(err))
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
// fit is cut.
func progressLine(c counts, pending int, elapsed time.Duration, width int) string {
	secs := elapsed.Seconds()
	parts := []string{
		fmt.Sprintf("%d pages", c.pages),
		fmt.Sprintf("%d failed", total(c.failed)),
		"", // queued, when known
		fmt.Sprintf("%d skipped", total(c.skipped)),
		fmt.Sprintf("%.1f pages/s", float64(c.pages)/max(secs, 1e-9)),
		fmt.Sprintf("%.0fs", secs),
	}
	if pending >= 0 {
		parts[2] = fmt.Sprintf("%d queued", pending)
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

// progress writes a report every interval until ctx is done. live means w
// is a terminal of width() columns: the report is one line rewritten in
// place. Otherwise (a pipe, a log file) each report is a line of its own,
// without carriage returns. pending, when set, reports the requests
// waiting; nil means unknown.
func progress(ctx context.Context, w io.Writer, t *tally, started time.Time, interval time.Duration, live bool, width func() int, pending func() int) {
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
			p := -1
			if pending != nil {
				p = pending()
			}
			if live {
				fmt.Fprintf(w, "\r%s\x1b[K", progressLine(t.snapshot(), p, time.Since(started), width()))
			} else {
				fmt.Fprintln(w, progressLine(t.snapshot(), p, time.Since(started), 0))
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
func startProgress(w io.Writer, t *tally, began time.Time, quiet bool, liveEvery time.Duration, pending func() int) (stop func()) {
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
	wg.Go(func() { progress(ctx, w, t, began, every, live, width, pending) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// summary writes the end-of-crawl report: pages, then the failures and the
// skips by kind.
func summary(w io.Writer, t *tally, elapsed time.Duration, retries uint64) {
	c := t.snapshot()
	fmt.Fprintf(w, "crawled %d pages in %.2fs (%.0f pages/s)", c.pages, elapsed.Seconds(), float64(c.pages)/max(elapsed.Seconds(), 1e-9))
	if retries > 0 {
		fmt.Fprintf(w, ", %d retries", retries)
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
		fmt.Fprintf(w, "already visited: %d links (not fetched again)\n", c.visited)
	}
}
