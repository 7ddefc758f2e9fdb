package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/cascadia"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/feed"
	mprom "github.com/magpiecrawl/magpie/metrics/prometheus"
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
	// fields, when set, make each page's item {url, fields...} instead of
	// a pageRecord; follow selects the links followed (default a[href]).
	fields []field
	follow string
	// onStart, when set, is given the collector before the crawl starts;
	// an error stops the crawl before it begins.
	onStart func(*magpie.Collector) error
}

// field is one -field NAME=CSS[@attr]: the text (or attribute) of the first
// element CSS matches.
type field struct{ name, css, attr string }

// fieldFlags collects repeated -field flags.
type fieldFlags []field

func (f *fieldFlags) String() string { return fmt.Sprint(*f) }

func (f *fieldFlags) Set(v string) error {
	name, sel, ok := strings.Cut(v, "=")
	if !ok || name == "" || sel == "" {
		return fmt.Errorf("want NAME=CSS or NAME=CSS@attr, got %q", v)
	}
	fl := field{name: name, css: sel}
	if i := strings.LastIndex(sel, "@"); i > 0 {
		fl.css, fl.attr = sel[:i], sel[i+1:]
	}
	if _, err := cascadia.Compile(fl.css); err != nil {
		return fmt.Errorf("field %s: %w", name, err)
	}
	*f = append(*f, fl)
	return nil
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
func crawl(ctx context.Context, cfg crawlConfig, t *tally, emit magpie.ItemProcessor) error {
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
	follow := cfg.follow
	if follow == "" {
		follow = "a[href]"
	}
	c.OnHTML(follow, func(e *magpie.HTMLElement) {
		n, _ := e.Request.Ctx.GetAny("links").(int)
		e.Request.Ctx.Put("links", n+1)
		// Refusals (other domain, robots.txt, already visited) reach OnRefused.
		_ = e.Request.Visit(e.Attr("href"))
	})
	if len(cfg.fields) > 0 {
		// One item per page: its URL and the fields, through the pipeline.
		c.OnHTML("html", func(e *magpie.HTMLElement) {
			item := map[string]any{"url": e.Request.URL.String()}
			for _, f := range cfg.fields {
				sel := e.DOM.Find(f.css).First()
				if f.attr != "" {
					v, _ := sel.Attr(f.attr)
					item[f.name] = strings.TrimSpace(v)
				} else {
					item[f.name] = strings.TrimSpace(sel.Text())
				}
			}
			e.Emit(item)
		})
	}
	c.OnScraped(func(r *magpie.Response) {
		t.page()
		if len(cfg.fields) > 0 {
			return
		}
		links, _ := r.Ctx.GetAny("links").(int)
		r.Emit(pageRecord{
			URL:    r.Request.URL.String(),
			Status: r.StatusCode,
			Title:  r.Ctx.Get("title"),
			Depth:  r.Request.Depth,
			Links:  links,
		})
	})
	c.Pipeline(emit)
	c.OnError(func(r *magpie.Response, err error) {
		t.fail(errorKind(err))
	})
	c.OnRefused(func(r *magpie.Request, err error) {
		t.fail(errorKind(err))
	})
	if cfg.onStart != nil {
		if err := cfg.onStart(c); err != nil {
			return err
		}
	}
	if err := c.Visit(cfg.start); err != nil {
		return err
	}
	c.Wait()
	return ctx.Err()
}

// progress prints the tally to w every interval until stop is closed.
// On a terminal (live) the line is rewritten in place; otherwise each is a
// line of its own. queue, when set, reports the requests still pending.
func progress(w io.Writer, t *tally, started time.Time, interval time.Duration, stop <-chan struct{}, live bool, queue func() int) {
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
			el := time.Since(started).Seconds()
			q := ""
			if queue != nil {
				q = fmt.Sprintf("  %4d queued", queue())
			}
			end := "\n"
			if live {
				end = ""
				fmt.Fprint(w, "\r")
			}
			fmt.Fprintf(w, "  %4d pages  %6.1f pages/s%s  %4d skipped or failed  %6.1fs%s", pages, float64(pages)/max(el, 1e-9), q, n, el, end)
		}
	}
}

// isTerminal reports whether w is a terminal, for a live progress line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
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
	out := fs.String("o", "", "write the items to this file, as JSON lines (.jsonl), CSV (.csv) or a JSON array (.json); default: JSON lines on standard output")
	var fields fieldFlags
	fs.Var(&fields, "field", "NAME=CSS (or NAME=CSS@attr): one field of each page's item, the first match's text (or attribute); repeatable")
	follow := fs.String("follow", "a[href]", "CSS selector of the links to follow")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics during the crawl")
	quiet := fs.Bool("quiet", false, "no progress line")
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
	var exp *feed.Exporter
	if *out != "" {
		var err error
		if exp, err = feed.Create(*out); err != nil {
			return err
		}
	} else {
		exp = feed.New(stdout, feed.JSONLines)
	}
	t := &tally{}
	began := time.Now()
	cfg := crawlConfig{start: start, depth: *depth, parallel: *parallel, delay: *delay,
		allowLoopback: *allowLoopback, fields: fields, follow: *follow}
	var metrics *http.Server
	var served chan struct{}
	stop := make(chan struct{})
	var progressDone sync.WaitGroup
	cfg.onStart = func(c *magpie.Collector) error {
		if *metricsAddr != "" {
			ln, err := net.Listen("tcp", *metricsAddr)
			if err != nil {
				return fmt.Errorf("-metrics: %w", err)
			}
			mux := http.NewServeMux()
			mux.Handle("GET /metrics", mprom.Handler(c))
			metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			served = make(chan struct{})
			go func() {
				defer close(served)
				_ = metrics.Serve(ln) // ErrServerClosed once the crawl is done
			}()
			fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", ln.Addr())
		}
		if !*quiet {
			live := isTerminal(stderr)
			every := 5 * time.Second
			if live {
				every = 200 * time.Millisecond
			}
			progressDone.Go(func() {
				progress(stderr, t, began, every, stop, live, func() int { return c.Stats().Pending })
			})
		}
		return nil
	}
	err := crawl(ctx, cfg, t, exp.Processor())
	close(stop)
	progressDone.Wait()
	if metrics != nil {
		_ = metrics.Close()
		<-served
	}
	summary(stderr, t, time.Since(began))
	return errors.Join(err, exp.Close())
}
