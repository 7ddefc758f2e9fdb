package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/andybalholm/cascadia"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/magpiecrawl/magpie"
	mprom "github.com/magpiecrawl/magpie/metrics/prometheus"
	"github.com/magpiecrawl/magpie/render"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// crawlFlags are the flags of magpie crawl.
type crawlFlags struct {
	depth, parallel, retries, maxPages int
	maxPagesPerHost                    int
	delay, timeout, maxDuration        time.Duration
	maxRetryAfter                      time.Duration
	out, format, follow, metrics       string
	userAgent, proxy, scope, state     string
	stateDir                           string // to create for --state DIR/ (statePath)
	// stateExisted is set by open when the --state file was there before
	// it opened it: a run that resumes or recrawls, which --errors appends to.
	stateExisted                       bool
	list, config                       string
	warc                               string
	politeness                         politenessFlag // politeness.go
	priorities                         priorityFlags  // priority.go
	order                              orderFlag      // priority.go
	fields                             fieldFlags
	headers, include, exclude          []string
	excludeExt                         []string
	quiet, allowLoopback, ignoreRobots bool
	sitemaps, render, resumeOutput     bool
	noParent                           bool
	failFlags
	netFlags
	recrawl recrawlFlags // recrawl.go
	ui      uiFlags      // ui.go
}

func newCrawlCommand() *cobra.Command {
	f := &crawlFlags{}
	cmd := &cobra.Command{
		Use:   "crawl URL... [flags]",
		Short: "crawl sites and write one item per page",
		Long: `Crawl follows the links of the start URLs within their scope (by default the
start URL's host, at any depth), obeying robots.txt, and writes one item per
page: {url, status, title, depth, links}, or with --field the fields given.

Start URLs come from the arguments and from --list (a file, or - for
standard input, one URL a line). A start URL's redirects are followed, and
the scope is taken from where it lands. The crawl fails (exit status 1) when
a start URL cannot be fetched; failures further in are counted in the
summary, and named by --errors FILE (JSON lines) and -v.
Connection errors, timeouts, 429 and 5xx answers (500, 502-504) are retried
(--retries), not before the server's Retry-After when it sends one.`,
		Example: `  magpie crawl https://example.com/ -o pages.jsonl
  magpie crawl https://example.com/docs/ --include '/docs/' --exclude-ext gz,zip --max-pages 500
  magpie crawl https://shop.example/ --field title=h1 --field price=.price -o - --format csv
  magpie crawl --list urls.txt --scope domain --state crawl.db -o pages.jsonl`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCrawl(cmd, f, args)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVarP(&f.out, "output", "o", "-", `write the items to FILE (.jsonl or .jl, .csv, .json); "-" is standard output`)
	fs.StringVar(&f.format, "format", "", "jsonl, csv or json, for -o -, pipes and file names without a known extension (default: by the file's extension; jsonl)")
	fs.Var(&f.fields, "field", "NAME=CSS or NAME=CSS@attr: a field of each page's item, the first match's text (or attribute; href, src, action, poster, cite and data give absolute URLs); repeatable, columns in this order")
	fs.StringVar(&f.follow, "follow", "a[href]", "CSS selector of the links to follow")
	fs.IntVarP(&f.depth, "depth", "d", 0, "maximum depth, the start page being 1 (0: unlimited)")
	fs.StringVar(&f.scope, "scope", "host", "what links may be followed: host (the start URL's host), subdomains (and its subdomains) or domain (its registrable domain and all subdomains)")
	fs.BoolVar(&f.noParent, "no-parent", false, "as wget's: never follow links above the start URL's directory on its host (from /docs/ or /docs/a.html, only /docs/ and below; a start URL's redirect adds the directory it lands in)")
	fs.StringArrayVar(&f.include, "include", nil, "follow only links whose URL matches this regexp (repeatable; start URLs always pass)")
	fs.StringArrayVar(&f.exclude, "exclude", nil, "never fetch a URL that matches this regexp (repeatable)")
	fs.StringSliceVar(&f.excludeExt, "exclude-ext", nil, "never fetch URLs whose path ends in these extensions (comma-separated, e.g. gz,zip,pdf)")
	fs.IntVar(&f.maxPages, "max-pages", 0, "stop after this many requests (0: no limit)")
	fs.IntVar(&f.maxPagesPerHost, "max-pages-per-host", 0, "make at most this many requests to each host (host:port); its other links are skipped (0: no limit)")
	fs.DurationVar(&f.maxDuration, "max-duration", 0, "stop the crawl after this long (e.g. 10m; 0: no limit)")
	fs.IntVar(&f.parallel, "parallel", 4, "requests in flight per host")
	fs.DurationVar(&f.delay, "delay", 0, "least time between two request starts to one host")
	fs.Var(&f.priorities, "priority", "REGEX=N: fetch pages whose URL matches REGEX with N added to their priority (higher first; N an int32); repeatable, the first matching pattern wins")
	fs.Var(&f.order, "order", "breadth (shallower pages first) or depth (deeper first), the priority that --priority adds to (default: the order links are found in)")
	fs.Var(&f.politeness, "politeness", "what --parallel and --delay apply to: each host, each registrable domain (all its hosts together) or each ip address (all the names on it together)")
	fs.StringVarP(&f.userAgent, "user-agent", "A", "", "User-Agent header (robots.txt rules are matched against it)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, `extra request header "Name: value" (repeatable)`)
	fs.StringVar(&f.proxy, "proxy", "", "send every request through this proxy (http://, https:// or socks5:// URL)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on each request, body included (0: none)")
	fs.IntVar(&f.retries, "retries", 2, "tries after a connection error, timeout, 408, 425, 429, 500, 502, 503 or 504 (0: none)")
	fs.DurationVar(&f.maxRetryAfter, "max-retry-after", defaultMaxRetryAfter, "longest server Retry-After to wait for: a page asked to wait longer fails at once as busy, and its host waits this long only (0: wait as asked, up to 10m)")
	fs.BoolVar(&f.ignoreRobots, "ignore-robots", false, "do not fetch or obey robots.txt")
	fs.BoolVar(&f.sitemaps, "sitemaps", false, "also crawl the pages of the sitemaps robots.txt lists and of /sitemap.xml")
	fs.StringVar(&f.state, "state", "", "keep the crawl's state in this SQLite file (in DIR/"+stateFileName+" for a directory: one that exists, or a path ending in /); run again with the same --state to resume (the output grows, whatever its format)")
	fs.BoolVar(&f.resumeOutput, "resume-output", false, "carry the items a killed run left in -o's hidden temporary file over into this run's output (a resumed --state crawl does so by itself)")
	f.recrawl.register(fs)
	fs.BoolVar(&f.render, "render", false, "load every page in headless Chromium so that JavaScript runs (needs chromium on PATH)")
	fs.StringVarP(&f.list, "list", "l", "", `read start URLs from this file, one a line ("-": standard input)`)
	fs.StringVar(&f.config, "config", "", `read flags from this file: one "name value" a line, # for comments; the command line wins`)
	fs.StringVar(&f.warc, "warc", "", warcUsage)
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics during the crawl")
	fs.StringVar(&f.ui.addr, "ui", "", "serve the live page (totals, charts, hosts, failures; pause, stop, block a host, add a URL) at http://ADDR/ during the crawl; PORT alone is 127.0.0.1:PORT, and an address other than loopback needs a token")
	fs.StringVar(&f.ui.token, "ui-token", "", "the token the live page asks for (default: none on loopback, a random one printed with the page's URL otherwise)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
	fs.BoolVar(&f.allowLoopback, "allow-loopback", false, "allow loopback addresses (127.0.0.0/8, ::1); other private networks stay refused")
	f.netFlags.add(fs)
	f.failFlags.add(fs)
	return cmd
}

// fieldFlags collects repeated --field flags.
type fieldFlags []field

func (f *fieldFlags) String() string {
	if len(*f) == 0 {
		return ""
	}
	parts := make([]string, len(*f))
	for i, fl := range *f {
		parts[i] = fl.name + "=" + fl.css
		if fl.attr != "" {
			parts[i] += "@" + fl.attr
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (f *fieldFlags) Type() string { return "NAME=CSS" }

func (f *fieldFlags) Set(v string) error {
	name, sel, ok := strings.Cut(v, "=")
	if !ok || name == "" || sel == "" {
		return fmt.Errorf("want NAME=CSS or NAME=CSS@attr, got %q", v)
	}
	if name == "url" {
		return errors.New(`field name "url" is taken by the page's URL`)
	}
	if err := f.checkField(name); err != nil {
		return err
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

// readURLs reads start URLs, one a line, from the --list named name;
// blank lines and lines starting with # are skipped. A line that is not an
// http or https URL is a usage error naming name:line.
func readURLs(r io.Reader, name string) ([]string, error) {
	var urls []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if u, err := url.Parse(line); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, usagef("--list %s:%d: %q is not an http or https URL", name, n, line)
		}
		urls = append(urls, line)
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("--list %s: %w", name, err)
	}
	return urls, nil
}

// config turns the flags into a crawlConfig.
func (f *crawlFlags) crawlConfig(cmd *cobra.Command, args []string) (crawlConfig, error) {
	cfg := crawlConfig{
		starts: args, depth: f.depth, parallel: f.parallel, delay: f.delay, politeness: f.politeness.p,
		allowLoopback: f.allowLoopback, fields: f.fields, follow: f.follow,
		userAgent: f.userAgent, proxy: proxyWithScheme(f.proxy), timeout: f.timeout, retries: f.retries, maxRetryAfter: f.maxRetryAfter,
		maxPages: f.maxPages, maxPagesPerHost: f.maxPagesPerHost, excludeExt: f.excludeExt, scope: f.scope,
		noParent: f.noParent, ignoreRobots: f.ignoreRobots, sitemaps: f.sitemaps,
		allowPrivate: f.allowPrivate, insecure: f.insecure, includeFailed: f.includeFailed,
		recrawl: f.recrawl.policy(f.state), recrawlExplicit: f.recrawl.explicit(),
		priorities: f.priorities, order: f.order.v,
	}
	if err := f.validate(); err != nil {
		return cfg, err
	}
	if err := f.recrawl.check(f.state); err != nil {
		return cfg, err
	}
	if f.list != "" {
		var r io.Reader = cmd.InOrStdin()
		if f.list != "-" {
			file, err := os.Open(f.list)
			if err != nil {
				return cfg, usagef("--list: %w", err)
			}
			defer file.Close()
			r = file
		}
		urls, err := readURLs(r, f.list)
		if err != nil {
			return cfg, err
		}
		cfg.starts = append(cfg.starts[:len(cfg.starts):len(cfg.starts)], urls...)
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return cfg, usagef(`--header %q: want "Name: value"`, h)
		}
		if cfg.headers == nil {
			cfg.headers = map[string]string{}
		}
		cfg.headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	for _, p := range []struct {
		flag string
		src  []string
		dst  *[]*regexp.Regexp
	}{{"include", f.include, &cfg.include}, {"exclude", f.exclude, &cfg.exclude}} {
		for _, s := range p.src {
			re, err := regexp.Compile(s)
			if err != nil {
				return cfg, usagef("--%s: %w", p.flag, err)
			}
			*p.dst = append(*p.dst, re)
		}
	}
	switch {
	case f.depth < 0, f.maxPages < 0, f.retries < 0, f.parallel < 1:
		return cfg, usagef("--depth, --max-pages and --retries must be >= 0, --parallel >= 1")
	case f.maxPagesPerHost < 0:
		return cfg, usagef("--max-pages-per-host must be >= 0")
	case f.maxRetryAfter < 0:
		return cfg, usagef("--max-retry-after %v: want a duration of 0 or more", f.maxRetryAfter)
	case f.scope != "host" && f.scope != "domain" && f.scope != "subdomains":
		return cfg, usagef("--scope %q: want host, domain or subdomains", f.scope)
	}
	if err := f.fields.checkTaken(f.state != "", f.includeFailed); err != nil {
		return cfg, usagef("--field: %w", err)
	}
	return cfg, nil
}

func runCrawl(cmd *cobra.Command, f *crawlFlags, args []string) error {
	if f.config != "" {
		if err := applyConfigFile(cmd.Flags(), f.config); err != nil {
			return err
		}
	}
	cfg, err := f.crawlConfig(cmd, args)
	if err != nil {
		return err
	}
	if len(cfg.starts) == 0 {
		return usagef("missing URL: magpie crawl URL... (or --list FILE)")
	}
	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	if f.maxDuration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, f.maxDuration, errMaxDuration)
		defer stop()
	}
	ui, err := f.ui.listen()
	if err != nil {
		return err
	}
	defer ui.close()
	out, closeAll, err := f.open(&cfg, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	defer closeAll()
	out.onFail = func(err error) { cancel(fmt.Errorf("output: %w", err)) }
	// A second Ctrl-C exits at once: what was written is still finished.
	// The hook stays until the crawl's own finish is done, so that a forced
	// exit during it waits for the rename instead of losing -o.
	keepOutput := onForcedExit(cmd.Context(), func() { _ = out.finish(false) })
	defer keepOutput()

	stderr := cmd.ErrOrStderr()
	progressTo := stderr
	if line := sharedLine(cmd.OutOrStdout(), stderr); line != nil {
		progressTo, out.line = line, line
	}
	if cfg.failures, err = f.failFlags.open(f.stateExisted, f.quiet, stderr); err != nil {
		return err
	}
	defer cfg.failures.close()
	// A second Ctrl-C: the --errors lines name every page found linking.
	defer onForcedExit(cmd.Context(), cfg.failures.close)()
	t, began := &tally{}, time.Now()
	stopMetrics, stopProgress, stopWaits := func() {}, func() {}, func() {}
	started := false
	cfg.onStart = func(c *magpie.Collector) error {
		if f.metrics != "" {
			stop, err := serveMetrics(f.metrics, c, stderr)
			if err != nil {
				return err
			}
			stopMetrics = stop
		}
		ui.start(c, func() error { cancel(errStoppedFromPage); return nil }, stderr)
		stopProgress = startProgress(progressTo, t, began, f.quiet, 200*time.Millisecond, c.Stats)
		stopWaits = watchWaits(c.Stats, cfg.failures)
		started = true
		return nil
	}
	finishWARC, err := f.startWARC(&cfg)
	if err != nil {
		return err
	}
	stats, crawlErr := crawl(ctx, cfg, t, out.Processor())
	crawlErr = errors.Join(crawlErr, finishWARC())
	stopProgress()
	stopWaits()
	stopMetrics()
	ui.close()
	if _, ok := errors.AsType[*usageError](crawlErr); ok {
		return errors.Join(crawlErr, out.abandon())
	}
	if errors.Is(crawlErr, errFinished) {
		sayFinished(stderr, f.state)
		return out.abandon()
	}
	stoppedEarly := errors.Is(crawlErr, errMaxDuration) || errors.Is(crawlErr, errStoppedFromPage)
	succeeded := crawlErr == nil || stoppedEarly && !hasStartError(crawlErr)
	outErr := out.finish(succeeded)
	if started && (!f.quiet || crawlErr != nil) {
		summary(stderr, t, time.Since(began), stats.Retries)
		if stats.NotStarted > 0 {
			// Not failures: the crawl stopped before sending them.
			fmt.Fprintf(stderr, "not started: %d (the crawl stopped first)\n", stats.NotStarted)
		}
		if n := t.interruptions(); n > 0 {
			// Not failures either: cut short in flight by the stop.
			fmt.Fprintf(stderr, "interrupted: %d (in flight when the crawl stopped)\n", n)
		}
		recrawlSummary(stderr, stats)
	}
	switch {
	case cmd.Context().Err() != nil:
		sayResume(stderr, f.state)
		if se, ok := context.Cause(cmd.Context()).(*signalError); ok {
			return errors.Join(fmt.Errorf("%w by %s", errInterrupted, signalName(se.sig)), outErr)
		}
		return errors.Join(errInterrupted, outErr)
	case succeeded && errors.Is(crawlErr, errMaxDuration):
		fmt.Fprintf(stderr, "stopped after --max-duration %v\n", f.maxDuration)
		sayResume(stderr, f.state)
		return outErr
	case succeeded && errors.Is(crawlErr, errStoppedFromPage):
		fmt.Fprintln(stderr, "stopped from the live page")
		sayResume(stderr, f.state)
		return outErr
	}
	cfg.failures.close()
	outErr = errors.Join(outErr, cfg.failures.err())
	if outErr != nil && errors.Is(crawlErr, outErr) {
		return crawlErr // the output's failure ended the crawl: said once
	}
	return errors.Join(crawlErr, outErr)
}

// sayResume tells how to go on with a --state crawl that was stopped.
func sayResume(stderr io.Writer, state string) {
	if state != "" {
		fmt.Fprintf(stderr, "the rest of the crawl is kept in %s: run the same command again to resume\n", state)
	}
}

// open checks the output and opens what the crawl needs besides: the state
// file and the browser. closeAll closes them.
func (f *crawlFlags) open(cfg *crawlConfig, stdout io.Writer) (out *output, closeAll func(), err error) {
	mode := f.outputModeFor()
	if out, err = planOutput(f.out, f.format, mode, cfg.columns(), stdout); err != nil {
		return nil, nil, err
	}
	if mode.appendItems {
		// Checked once the state file showed the crawl is not finished.
		cfg.ready = out.prepare
	} else if err := out.prepare(); err != nil {
		return nil, nil, err // before a state file is made
	}
	var closers []func() error
	closeAll = func() {
		for _, c := range slices.Backward(closers) {
			_ = c()
		}
	}
	if f.stateDir != "" {
		if err := os.MkdirAll(f.stateDir, 0o777); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("--state: %w", err), out.abandon())
		}
	}
	if f.state != "" {
		_, err := os.Stat(f.state)
		f.stateExisted = err == nil
		store, err := sqlitestore.Open(f.state)
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("--state: %w", err), out.abandon())
		}
		closers = append(closers, store.Close)
		cfg.state = store
	}
	if f.render {
		opts := []render.Option{render.All(), render.Timeout(max(f.timeout, 30*time.Second))}
		if f.insecure {
			// --insecure covers every fetch; the browser checks certificates
			// itself, so it is told too.
			opts = append(opts, render.BrowserFlag("ignore-certificate-errors", true))
		}
		r, err := render.New(opts...)
		if err != nil {
			closeAll()
			return nil, nil, errors.Join(fmt.Errorf("--render: %w", err), out.abandon())
		}
		closers = append(closers, r.Close)
		cfg.fetcher = r
	}
	return out, closeAll, nil
}

// serveMetrics serves c's Prometheus metrics at http://addr/metrics until
// stop is called.
func serveMetrics(addr string, c *magpie.Collector, stderr io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", mprom.Handler(c))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // ErrServerClosed once the crawl is done
	}()
	fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", ln.Addr())
	return func() {
		_ = srv.Close()
		<-served
	}, nil
}

// defaultMaxRetryAfter is --max-retry-after's default: a server that asks
// for a minute's pause gets it (and its host waits as long), and one that
// asks for more does not stall the crawl: its page fails as busy, to be
// fetched by a later run.
const defaultMaxRetryAfter = time.Minute

// errMaxDuration is the cause of a crawl stopped by --max-duration.
var errMaxDuration = errors.New("--max-duration reached")

func hasStartError(err error) bool {
	var se *startError
	return errors.As(err, &se)
}

// applyConfigFile sets the flags a config file names and the command line
// did not. Each line is "name value", "name=value" or "name" (a boolean),
// the name with or without its dashes; blank lines and lines starting with
// # are skipped, and a value may be double-quoted. A repeatable flag may be
// given on several lines.
func applyConfigFile(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return usagef("--config: %w", err) // no such file, a directory
	}
	set := map[*pflag.Flag]bool{} // flags this file set
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, hasValue := line, "", false
		if i := strings.IndexAny(line, "= \t"); i >= 0 {
			name, value, hasValue = line[:i], strings.TrimSpace(line[i:]), true
			value = strings.TrimSpace(strings.TrimPrefix(value, "="))
		}
		name = strings.TrimLeft(name, "-")
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		fl := fs.Lookup(name)
		if fl == nil || name == "config" {
			return usagef("--config %s:%d: unknown flag %q", path, n+1, name)
		}
		if !hasValue {
			// A bare name: true for a boolean, a flag's own default value
			// otherwise (--allow-private's intranet ranges).
			if fl.NoOptDefVal == "" {
				return usagef("--config %s:%d: %s needs a value", path, n+1, name)
			}
			value = fl.NoOptDefVal
		}
		if fl.Changed && !set[fl] {
			continue // the command line wins
		}
		if err := fs.Set(name, value); err != nil {
			return usagef("--config %s:%d: %v", path, n+1, err)
		}
		set[fl] = true
	}
	return nil
}
