package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/magpiecrawl/magpie"
)

// crawlConfig is what both commands crawl with.
type crawlConfig struct {
	start    string
	depth    int
	parallel int
	delay    time.Duration
	// allowLoopback lets the crawl reach loopback addresses, which the
	// private-network guard refuses otherwise.
	allowLoopback bool
}

// loopback is what -allow-loopback lets through the guard.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// pageRecord is one line of crawl output.
type pageRecord struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Title  string `json:"title"`
	Depth  int    `json:"depth"`
	Links  int    `json:"links"`
}

// tally counts pages and errors by kind; safe for concurrent use.
type tally struct {
	// mu guards pages and errs.
	mu    sync.Mutex
	pages int
	errs  map[string]int
}

func (t *tally) page() {
	t.mu.Lock()
	t.pages++
	t.mu.Unlock()
}

func (t *tally) fail(kind string) {
	t.mu.Lock()
	if t.errs == nil {
		t.errs = make(map[string]int)
	}
	t.errs[kind]++
	t.mu.Unlock()
}

func (t *tally) snapshot() (pages int, errs map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	errs = make(map[string]int, len(t.errs))
	for k, v := range t.errs {
		errs[k] = v
	}
	return t.pages, errs
}

// errorKind names an error for the summary.
func errorKind(err error) string {
	var httpErr *magpie.HTTPError
	var visited *magpie.AlreadyVisitedError
	switch {
	case errors.As(err, &httpErr):
		return fmt.Sprintf("http %d", httpErr.StatusCode)
	case errors.As(err, &visited):
		return "already visited (skipped)"
	case errors.Is(err, magpie.ErrForbiddenDomain):
		return "other domain (skipped)"
	case errors.Is(err, magpie.ErrRobotsTxtBlocked):
		return "blocked by robots.txt"
	case errors.Is(err, magpie.ErrMaxDepth):
		return "too deep (skipped)"
	case errors.Is(err, magpie.ErrUnsupportedScheme):
		return "not http (skipped)"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		return "other"
	}
}

// crawl crawls cfg.start's host and calls emit for every page scraped.
func crawl(ctx context.Context, cfg crawlConfig, t *tally, emit func(pageRecord)) error {
	start, err := url.Parse(cfg.start)
	if err != nil {
		return fmt.Errorf("start URL: %w", err)
	}
	if start.Scheme != "http" && start.Scheme != "https" {
		return fmt.Errorf("start URL %q: want an http or https URL", cfg.start)
	}
	var allow []netip.Prefix
	if cfg.allowLoopback {
		allow = loopback
	}
	c := magpie.NewCollector(
		magpie.Async(true),
		magpie.AllowedDomains(start.Hostname()),
		magpie.MaxDepth(cfg.depth),
		magpie.StdlibContext(ctx),
		// URLs from the internet must not make the crawler reach the
		// machine's own or its network's services.
		magpie.DenyPrivateNetworks(allow...),
	)
	parallel := max(cfg.parallel, 1)
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: parallel, Delay: cfg.delay}); err != nil {
		return err
	}
	c.OnResponse(func(r *magpie.Response) {
		// Children get a copy of their parent's Context: start each page afresh.
		r.Ctx.Put("title", "")
		r.Ctx.Put("links", 0)
	})
	c.OnHTML("title", func(e *magpie.HTMLElement) {
		e.Request.Ctx.Put("title", strings.TrimSpace(e.Text))
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		n, _ := e.Request.Ctx.GetAny("links").(int)
		e.Request.Ctx.Put("links", n+1)
		// Refusals (other domain, robots.txt, already visited) reach OnRefused.
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnScraped(func(r *magpie.Response) {
		t.page()
		links, _ := r.Ctx.GetAny("links").(int)
		emit(pageRecord{
			URL:    r.Request.URL.String(),
			Status: r.StatusCode,
			Title:  r.Ctx.Get("title"),
			Depth:  r.Request.Depth,
			Links:  links,
		})
	})
	c.OnError(func(r *magpie.Response, err error) {
		t.fail(errorKind(err))
	})
	c.OnRefused(func(r *magpie.Request, err error) {
		t.fail(errorKind(err))
	})
	if err := c.Visit(cfg.start); err != nil {
		return err
	}
	c.Wait()
	return ctx.Err()
}

// progress prints the tally to w every interval until stop is closed.
func progress(w io.Writer, t *tally, started time.Time, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			pages, errs := t.snapshot()
			n := 0
			for _, v := range errs {
				n += v
			}
			fmt.Fprintf(w, "\r  %4d pages  %4d skipped or failed  %6.1fs", pages, n, time.Since(started).Seconds())
		}
	}
}

// summary writes the end-of-crawl report.
func summary(w io.Writer, t *tally, elapsed time.Duration) {
	pages, errs := t.snapshot()
	fmt.Fprintf(w, "\ncrawled %d pages in %.2fs (%.0f pages/s)\n", pages, elapsed.Seconds(), float64(pages)/elapsed.Seconds())
	kinds := make([]string, 0, len(errs))
	for k := range errs {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-28s %d\n", k, errs[k])
	}
}

func runCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	depth := fs.Int("depth", 3, "maximum depth (the start page is 1; 0 = unlimited)")
	parallel := fs.Int("parallel", 4, "requests in flight per host")
	delay := fs.Duration("delay", 0, "least time between two request starts to one host")
	out := fs.String("o", "", "write JSON lines to this file instead of standard output")
	allowLoopback := fs.Bool("allow-loopback", false, "allow loopback addresses (127.0.0.0/8, ::1); other private networks stay refused")
	// Accept the URL before or after the flags.
	var start string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		start, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if start == "" && fs.NArg() > 0 {
		start = fs.Arg(0)
	}
	if start == "" {
		return errors.New("missing URL: magpie crawl URL [flags]")
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	var encErr error
	emit := func(p pageRecord) {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(p); err != nil && encErr == nil {
			encErr = err
		}
	}
	t := &tally{}
	began := time.Now()
	err := crawl(ctx, crawlConfig{start: start, depth: *depth, parallel: *parallel, delay: *delay, allowLoopback: *allowLoopback}, t, emit)
	summary(stderr, t, time.Since(began))
	return errors.Join(err, encErr)
}
