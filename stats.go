package magpie

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// maxStatsHosts bounds Stats.Hosts, so that a crawl of many hosts reports
// a bounded list (the busiest first).
const maxStatsHosts = 50

// Stats is a snapshot of a collector's counters, safe to take during a crawl
// (also from callbacks). It prints as text with String and marshals to JSON.
type Stats struct {
	// Requests is how many requests were sent: every try of a page (a
	// retry counts again, see Retries), and CheckHead's HEAD, whether it
	// was answered or failed in transit. A queue run counts the entries it
	// leased and sent, whichever process queued them (a resumed crawl
	// too). Requests refused, waiting, served from the cache or aborted in
	// OnRequest were not sent; robots.txt fetches are RobotsFetches.
	Requests uint32 `json:"requests"`
	// Responses is how many responses were received.
	Responses uint32 `json:"responses"`
	// StatusCodes counts responses by HTTP status code.
	StatusCodes map[int]uint64 `json:"status_codes"`
	// StatusClasses counts responses by class: "2xx", "3xx", "4xx", "5xx".
	StatusClasses map[string]uint64 `json:"status_classes"`
	// Bytes is the decoded body bytes received.
	Bytes uint64 `json:"bytes"`
	// Pending is how many requests of the current crawl are admitted and
	// not finished (waiting, parked or in flight); 0 when no crawl runs.
	Pending int `json:"pending"`
	// Paused reports whether the collector is paused (Pause): no request
	// starts until Resume.
	Paused bool `json:"paused"`
	// Parked is how many requests wait in the politeness gate for their
	// host's turn (at most MaxParked, plus limits.ParkedPerHost per host
	// past the first).
	Parked int `json:"parked"`
	// Hosts are the hosts of the current crawl with requests in flight or
	// waiting in the gate, the busiest first, at most 50.
	Hosts []limits.HostStat `json:"hosts,omitempty"`
	// Waiting is how many requests of the current crawl wait in the
	// frontier before they are sent (again): retries waiting out a
	// Retry-After (see MaxRetryAfter) or a RetryPolicy's back-off, and
	// requests waiting for their host's unreachable robots.txt. Waits
	// lists them, the longest wait first, at most 50. A wait ends when its
	// request leaves the frontier, or at its Until.
	Waiting int    `json:"waiting"`
	Waits   []Wait `json:"waits,omitempty"`
	// Refused counts requests refused before they were sent, by reason
	// (the Refused* constants); reasons never seen are absent.
	Refused map[string]uint64 `json:"refused"`
	// FragmentLinks counts links to a place in their own page ("#top"),
	// which are not followed.
	FragmentLinks uint64 `json:"fragment_links"`
	// Failed counts the requests that failed (reached OnError), by kind
	// (the Fail* constants); kinds never seen are absent. RecentFailures
	// lists the latest.
	Failed map[string]uint64 `json:"failed"`
	// NotStarted counts requests that were never sent because the crawl
	// stopped (Stop, the StdlibContext ending, RunQueue's context ending):
	// they are not failures, and no OnError call hears of them. An
	// in-memory crawl counts the admitted requests it dropped; a queue run
	// counts the entries it left in its queue (storage.QueueLen.Total when
	// it stopped, less those whose fetch was cut short in flight, which
	// OnError heard of), to be fetched by a later run.
	NotStarted uint64 `json:"not_started"`
	// Retries counts requests sent again by the RetryPolicy.
	Retries uint64 `json:"retries"`
	// BusyRetries counts requests sent again because the server answered
	// 429, or 503 with Retry-After (see BusyRetries), without a
	// RetryPolicy covering that status.
	BusyRetries uint64 `json:"busy_retries"`
	// RobotsFetches counts robots.txt fetches.
	RobotsFetches uint64 `json:"robots_fetches"`
	// HTMLStreamed counts the HTML pages whose OnHTML selectors were
	// matched while tokenizing (StreamHTML); HTMLParsedWhole those that
	// StreamHTML had to parse whole because their tree is not the nesting
	// of their tags. Both stay 0 without StreamHTML or when a selector or an
	// OnXML callback needs the whole document.
	HTMLStreamed    uint64 `json:"html_streamed"`
	HTMLParsedWhole uint64 `json:"html_parsed_whole"`
	// ItemsScraped, ItemsDropped and ItemsFailed count the items that
	// passed every pipeline, that a processor dropped (ErrDropItem), and
	// that a processor failed.
	ItemsScraped uint64 `json:"items_scraped"`
	ItemsDropped uint64 `json:"items_dropped"`
	ItemsFailed  uint64 `json:"items_failed"`
	// Recrawl counts the pages of recrawl mode (Recrawl) by what was found;
	// all zero without it.
	Recrawl RecrawlStats `json:"recrawl"`

	// Elapsed is the time since the collector's first crawl started.
	Elapsed time.Duration `json:"elapsed_ns"`
	// PagesPerSecond is Responses / Elapsed.
	PagesPerSecond float64 `json:"pages_per_second"`
}

// counters are the collector's own counts behind Stats.
type counters struct {
	bytes, retries, robots atomic.Uint64
	busyRetries            atomic.Uint64
	// notStarted counts requests a stopping crawl never sent (Stats.NotStarted).
	notStarted atomic.Uint64
	// streamed and parsedWhole count the HTML pages StreamHTML matched
	// while tokenizing and those it had to parse whole.
	streamed, parsedWhole atomic.Uint64
	// sent counts requests sent (Stats.Requests).
	sent    atomic.Uint64
	started atomic.Int64 // unix nanoseconds of the first crawl
	// mu guards codes.
	mu    sync.Mutex
	codes map[int]uint64
}

func (n *counters) response(code int, bytes int) {
	n.bytes.Add(uint64(bytes))
	n.mu.Lock()
	if n.codes == nil {
		n.codes = make(map[int]uint64)
	}
	n.codes[code]++
	n.mu.Unlock()
}

func (n *counters) start(now time.Time) { n.started.CompareAndSwap(0, now.UnixNano()) }

// Stats returns the collector's counters and the current crawl's state.
func (c *Collector) Stats() Stats {
	st := Stats{
		Requests: uint32(c.counts.sent.Load()), Responses: c.responseCount.Load(),
		StatusCodes: map[int]uint64{}, StatusClasses: map[string]uint64{},
		Bytes: c.counts.bytes.Load(), NotStarted: c.counts.notStarted.Load(), Retries: c.counts.retries.Load(), BusyRetries: c.counts.busyRetries.Load(), RobotsFetches: c.counts.robots.Load(),
		HTMLStreamed: c.counts.streamed.Load(), HTMLParsedWhole: c.counts.parsedWhole.Load(),
		Refused: c.refusals.snapshot(), Failed: c.watch.failures.kindCounts(), FragmentLinks: c.refusals.fragments.Load(), Paused: c.Paused(),
		ItemsScraped: c.items.scraped.Load(), ItemsDropped: c.items.dropped.Load(), ItemsFailed: c.items.failed.Load(),
	}
	st.Recrawl = c.recrawlStats()
	c.counts.mu.Lock()
	for code, n := range c.counts.codes {
		st.StatusCodes[code] = n
		st.StatusClasses[fmt.Sprintf("%dxx", code/100)] += n
	}
	c.counts.mu.Unlock()
	if t := c.counts.started.Load(); t != 0 {
		st.Elapsed = time.Since(time.Unix(0, t))
		if st.Elapsed > 0 {
			st.PagesPerSecond = float64(st.Responses) / st.Elapsed.Seconds()
		}
	}
	c.runMu.Lock()
	r := c.run
	c.runMu.Unlock()
	if r != nil {
		st.Pending = r.front.pending()
		st.Parked = r.gate.Stats().Parked
		st.Hosts = r.gate.HostStats(maxStatsHosts)
		st.Waiting, st.Waits = r.waits.snapshot(time.Now(), maxStatsWaits)
	}
	return st
}

// String prints the snapshot as a few lines of text.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests %d, responses %d (%s), %s, %.1f pages/s over %v\n",
		s.Requests, s.Responses, sortedCounts(s.StatusClasses), byteSize(s.Bytes), s.PagesPerSecond, s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "items: %d scraped, %d dropped, %d failed; retries %d, busy retries %d; robots.txt fetches %d\n",
		s.ItemsScraped, s.ItemsDropped, s.ItemsFailed, s.Retries, s.BusyRetries, s.RobotsFetches)
	fmt.Fprintf(&b, "refused: %s; fragment links %d\n", sortedCounts(s.Refused), s.FragmentLinks)
	if s.HTMLStreamed+s.HTMLParsedWhole > 0 {
		fmt.Fprintf(&b, "StreamHTML: %d pages streamed, %d parsed whole\n", s.HTMLStreamed, s.HTMLParsedWhole)
	}
	fmt.Fprintf(&b, "pending %d, parked %d, not started (crawl stopped) %d", s.Pending, s.Parked, s.NotStarted)
	if s.Paused {
		b.WriteString("; paused")
	}
	for _, h := range s.Hosts {
		fmt.Fprintf(&b, "\n  %s: %d in flight, %d waiting", h.Host, h.InFlight, h.Waiting)
	}
	if s.Waiting > 0 {
		fmt.Fprintf(&b, "\nwaiting %d", s.Waiting)
		for _, w := range s.Waits {
			fmt.Fprintf(&b, "\n  %s until %s: %s %s", w.Reason, w.Until.Format(time.TimeOnly), w.Method, w.URL)
		}
	}
	return b.String()
}

func sortedCounts(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func byteSize(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ProgressInterval makes every crawl log a progress line (pages, pages/s,
// pending, errors, and while requests wait for a retry or robots.txt how
// many, and the longest wait's reason, url and duration) through the Logger
// at Info every d; 0, the default, logs none. The line stops with the crawl.
func ProgressInterval(d time.Duration) CollectorOption {
	return func(c *Collector) { c.progressEvery = d }
}

// progress logs the progress line every d until ctx ends; a goroutine of
// the run, which waits for it.
func (r *run) progress(ctx context.Context, d time.Duration) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			st := r.c.Stats()
			attrs := []slog.Attr{
				slog.Uint64("pages", uint64(st.Responses)), slog.Float64("pages_per_s", st.PagesPerSecond),
				slog.Int("pending", st.Pending), slog.Uint64("items", st.ItemsScraped),
				slog.Uint64("errors", st.StatusClasses["4xx"]+st.StatusClasses["5xx"]+st.ItemsFailed),
			}
			if len(st.Waits) > 0 {
				// Why the crawl seems to stand still: the wait that ends last.
				w := st.Waits[0]
				attrs = append(attrs, slog.Int("waiting", st.Waiting), slog.String("reason", w.Reason),
					slog.String("url", w.URL), slog.Duration("duration", time.Until(w.Until).Round(time.Second)))
			}
			r.c.logger.LogAttrs(ctx, slog.LevelInfo, "progress", attrs...)
		}
	}
}
