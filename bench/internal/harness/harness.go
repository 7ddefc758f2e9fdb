// Package harness is what every crawl command of the benchmark shares: the
// configuration, the counters, the command-line front end that prints one JSON
// line of results, and the raw net/http baseline crawler.
//
// Colly and magpie cannot be linked into one binary (they need incompatible
// versions of github.com/gobwas/glob), so bench/cmd/crawl (raw, Colly) and the
// bench/magpie module (raw, magpie) are two commands over this package.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is what every implementation is given.
type Config struct {
	// Seed is the start URL.
	Seed string
	// P is the parallelism: workers, queue threads, LimitRule Parallelism.
	P int
	// Delay is the least time between two request starts to one host
	// (Colly: the sleep after each response while holding the slot).
	Delay time.Duration
	// HostPar is the most requests in flight to one host; P when not set.
	HostPar int
	// Polite is set when -delay or -host-par asks for per-host limits.
	Polite bool
	// Hosts are the host:port of every host of the site, the seed's first.
	Hosts []string
	// Allowed are the hostnames (no port) a crawler may visit.
	Allowed []string
	// Robots makes the raw and Colly crawlers honour robots.txt, as
	// magpie's always do.
	Robots bool
}

// Counters are what every implementation reports. Safe for concurrent use.
type Counters struct {
	Pages  atomic.Int64 // 2xx responses
	Errors atomic.Int64 // transport errors and non-2xx responses
	// Frontier is the largest frontier (queued requests) the crawl saw;
	// only the storage scenario's implementations set it.
	Frontier atomic.Int64
	// Procs is the number of worker processes the crawl ran, when it ran
	// any (the storage scenario's multi-process crawl).
	Procs atomic.Int64
	// Held is what a sampled crawl held at most (crawl-magpie -sample);
	// nil when not sampled. The crawl sets it before it returns.
	Held *Held
}

// Held is the most a crawl held at once, read every so often while it ran
// (so a lower bound of the true peak): the queue entries it had leased and
// the requests waiting in the politeness gate for their host's turn.
type Held struct {
	// MaxLeased is the most queue entries leased at once
	// (storage.QueueLen.Leased), -1 for a crawl with no queue.
	MaxLeased int64 `json:"max_leased"`
	// MaxParked is the most requests parked in the gate at once
	// (magpie's Stats().Parked).
	MaxParked int64 `json:"max_parked"`
	// Samples counts the readings.
	Samples int64 `json:"samples"`
}

// CrawlFunc crawls the site described by cfg until done or ctx ends.
type CrawlFunc func(ctx context.Context, cfg Config, n *Counters) error

// Result is the JSON line a crawl command prints on stdout.
type Result struct {
	Impl      string  `json:"impl"`
	P         int     `json:"p"`
	Pages     int64   `json:"pages"`
	Errors    int64   `json:"errors"`
	WallS     float64 `json:"wall_s"`
	PagesPerS float64 `json:"pages_per_s"`
	CPUS      float64 `json:"cpu_s"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// AllocsPerPage is the heap allocations (runtime.MemStats.Mallocs)
	// this process made during the crawl, divided by its pages; worker
	// processes a crawl starts are not in it.
	AllocsPerPage float64 `json:"allocs_per_page"`
	Frontier      int64   `json:"frontier,omitempty"`
	Procs         int64   `json:"procs,omitempty"`
	Held          *Held   `json:"held,omitempty"`
	TimedOut      bool    `json:"timed_out,omitempty"`
	Err           string  `json:"err,omitempty"`
}

// Main is a crawl command: it parses the flags, runs the chosen
// implementation once and prints its Result. It exits 1 when the crawl
// failed or timed out, 2 on bad flags.
func Main(impls map[string]CrawlFunc) {
	var (
		impl    = flag.String("impl", "raw", "implementation: "+strings.Join(Names(impls), "|"))
		p       = flag.Int("p", 8, "parallelism: workers, queue threads, LimitRule Parallelism")
		seed    = flag.String("url", "", "start URL (required)")
		delay   = flag.Duration("delay", 0, "per-host delay between request starts")
		hostPar = flag.Int("host-par", 0, "per-host parallelism (0: -p); set with -delay for politeness")
		hosts   = flag.String("hosts", "", "comma or space separated base URLs or host:port of every host of the site, or @FILE to read them from FILE")
		timeout = flag.Duration("timeout", 30*time.Minute, "give up after this long")
		list    = flag.Bool("list", false, "print the implementations built in and exit")
		robots  = flag.Bool("robots", false, "honour robots.txt (raw and Colly; magpie always does)")
	)
	flag.Parse()
	if *list {
		fmt.Println(strings.Join(Names(impls), " "))
		return
	}
	if name, ok := strings.CutPrefix(*hosts, "@"); ok {
		// A broad crawl's thousands of hosts exceed what one argument may hold.
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crawl: -hosts:", err)
			os.Exit(2)
		}
		*hosts = strings.TrimSpace(string(b))
	}
	cfg, err := NewConfig(*seed, *p, *delay, *hostPar, *hosts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crawl:", err)
		os.Exit(2)
	}
	cfg.Robots = *robots
	fn, ok := impls[*impl]
	if !ok {
		fmt.Fprintf(os.Stderr, "crawl: unknown -impl %q (built: %s)\n", *impl, strings.Join(Names(impls), ", "))
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	res, err := Run(ctx, *impl, fn, cfg)
	cancel()
	var ru syscall.Rusage
	if e := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); e == nil {
		res.CPUS = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
		res.PeakRSSMB = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	// Worker processes a crawl started and waited for count in its CPU time
	// (their peak RSS is in their own result lines).
	if e := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); e == nil {
		res.CPUS += tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
	}
	if err != nil {
		res.Err = err.Error()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err != nil || res.TimedOut {
		os.Exit(1)
	}
}

// Run runs one crawl and returns its Result but for the CPU time and peak
// RSS, which Main reads for the whole process: pages, errors, wall time,
// pages/s and the allocations per page, counted around the crawl alone.
func Run(ctx context.Context, impl string, fn CrawlFunc, cfg Config) (Result, error) {
	var n Counters
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := fn(ctx, cfg, &n)
	wall := time.Since(start)
	runtime.ReadMemStats(&after)
	res := Result{
		Impl: impl, P: cfg.P, Pages: n.Pages.Load(), Errors: n.Errors.Load(),
		WallS: wall.Seconds(), TimedOut: ctx.Err() != nil,
		Frontier: n.Frontier.Load(), Procs: n.Procs.Load(), Held: n.Held,
	}
	if wall > 0 {
		res.PagesPerS = float64(res.Pages) / wall.Seconds()
	}
	if res.Pages > 0 {
		res.AllocsPerPage = float64(after.Mallocs-before.Mallocs) / float64(res.Pages)
	}
	return res, err
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// Names returns the implementation names, sorted.
func Names(impls map[string]CrawlFunc) []string {
	names := make([]string, 0, len(impls))
	for k := range impls {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// NewConfig checks the flags and builds the Config.
func NewConfig(seed string, p int, delay time.Duration, hostPar int, hosts string) (Config, error) {
	if seed == "" {
		return Config{}, errors.New("-url is required")
	}
	u, err := url.Parse(seed)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Config{}, fmt.Errorf("-url %q is not an absolute http(s) URL", seed)
	}
	if p < 1 {
		return Config{}, errors.New("-p must be at least 1")
	}
	if delay < 0 || hostPar < 0 {
		return Config{}, errors.New("-delay and -host-par must not be negative")
	}
	cfg := Config{Seed: seed, P: p, Delay: delay, HostPar: hostPar, Polite: delay > 0 || hostPar > 0}
	if cfg.HostPar == 0 {
		cfg.HostPar = p
	}
	cfg.Hosts = []string{u.Host}
	// Sets beside the lists: a broad crawl names thousands of hosts.
	seenHost, seenName := map[string]bool{u.Host: true}, map[string]bool{}
	for _, h := range strings.FieldsFunc(hosts, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		if hu, err := url.Parse(h); err == nil && hu.Host != "" {
			h = hu.Host
		}
		if !seenHost[h] {
			seenHost[h] = true
			cfg.Hosts = append(cfg.Hosts, h)
		}
	}
	for _, h := range cfg.Hosts {
		name := (&url.URL{Host: h}).Hostname()
		if !seenName[name] {
			seenName[name] = true
			cfg.Allowed = append(cfg.Allowed, name)
		}
	}
	return cfg, nil
}
