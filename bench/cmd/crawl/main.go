// Command crawl crawls a whole site with one of several implementations and
// prints one JSON line of results: pages fetched, errors, wall and CPU time
// and peak RSS of this process.
//
// Implementations (-impl):
//
//	raw           P goroutines over net/http, x/net/html tokenizer, in-memory visited set
//	colly-async   Colly v2, Async + LimitRule, e.Request.Visit from OnHTML
//	colly-queue   Colly v2, sync collector run by queue.New(P, ...), q.AddURL from OnHTML
//	magpie-async  magpie, the colly-async program with magpie's import path
//	magpie-queue  magpie, queue.New(P, nil) + q.AddURL + q.Run, e.Request.Visit from OnHTML
//
// Politeness: with -delay or -host-par every host gets its own limit
// (at most -host-par requests in flight, -delay between request starts),
// and -p still bounds the workers (raw, queues) where the implementation has
// them. Only 127.0.0.1 is crawled; links elsewhere are ignored.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// config is what every implementation is given.
type config struct {
	seed string
	p    int
	// delay is the least time between two request starts to one host
	// (Colly: the sleep after each response while holding the slot).
	delay time.Duration
	// hostPar is the most requests in flight to one host; 0 means p.
	hostPar int
	// polite is set when -delay or -host-par asks for per-host limits.
	polite bool
	// hosts are the host:port of every host of the site.
	hosts []string
	// allowed are the hostnames (no port) a crawler may visit.
	allowed []string
}

// counters are what every implementation reports. Safe for concurrent use.
type counters struct {
	pages  atomic.Int64 // 2xx responses
	errors atomic.Int64 // transport errors and non-2xx responses
}

// crawlFunc crawls the site described by cfg until done or ctx ends.
type crawlFunc func(ctx context.Context, cfg config, n *counters) error

var impls = map[string]crawlFunc{
	"raw":         crawlRaw,
	"colly-async": crawlCollyAsync,
	"colly-queue": crawlCollyQueue,
}

// result is the JSON line printed on stdout.
type result struct {
	Impl      string  `json:"impl"`
	P         int     `json:"p"`
	Pages     int64   `json:"pages"`
	Errors    int64   `json:"errors"`
	WallS     float64 `json:"wall_s"`
	PagesPerS float64 `json:"pages_per_s"`
	CPUS      float64 `json:"cpu_s"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	TimedOut  bool    `json:"timed_out,omitempty"`
	Err       string  `json:"err,omitempty"`
}

func main() {
	var (
		impl    = flag.String("impl", "raw", "implementation: "+strings.Join(implNames(), "|"))
		p       = flag.Int("p", 8, "parallelism: workers, queue threads, LimitRule Parallelism")
		seed    = flag.String("url", "", "start URL (required)")
		delay   = flag.Duration("delay", 0, "per-host delay between request starts")
		hostPar = flag.Int("host-par", 0, "per-host parallelism (0: -p); set with -delay for politeness")
		hosts   = flag.String("hosts", "", "comma or space separated base URLs or host:port of every host of the site")
		timeout = flag.Duration("timeout", 30*time.Minute, "give up after this long")
		list    = flag.Bool("list", false, "print the implementations built in and exit")
	)
	flag.Parse()
	if *list {
		fmt.Println(strings.Join(implNames(), " "))
		return
	}

	cfg, err := newConfig(*seed, *p, *delay, *hostPar, *hosts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crawl:", err)
		os.Exit(2)
	}
	fn, ok := impls[*impl]
	if !ok {
		fmt.Fprintf(os.Stderr, "crawl: unknown -impl %q (built: %s)\n", *impl, strings.Join(implNames(), ", "))
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var n counters
	start := time.Now()
	err = fn(ctx, cfg, &n)
	wall := time.Since(start)

	res := result{
		Impl: *impl, P: cfg.p, Pages: n.pages.Load(), Errors: n.errors.Load(),
		WallS: wall.Seconds(), TimedOut: ctx.Err() != nil,
	}
	if wall > 0 {
		res.PagesPerS = float64(res.Pages) / wall.Seconds()
	}
	var ru syscall.Rusage
	if e := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); e == nil {
		res.CPUS = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
		res.PeakRSSMB = float64(ru.Maxrss) / 1024 // Linux reports KiB
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

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

func implNames() []string {
	names := make([]string, 0, len(impls))
	for k := range impls {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func newConfig(seed string, p int, delay time.Duration, hostPar int, hosts string) (config, error) {
	if seed == "" {
		return config{}, errors.New("-url is required")
	}
	u, err := url.Parse(seed)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return config{}, fmt.Errorf("-url %q is not an absolute http(s) URL", seed)
	}
	if p < 1 {
		return config{}, errors.New("-p must be at least 1")
	}
	if delay < 0 || hostPar < 0 {
		return config{}, errors.New("-delay and -host-par must not be negative")
	}
	cfg := config{seed: seed, p: p, delay: delay, hostPar: hostPar, polite: delay > 0 || hostPar > 0}
	if cfg.hostPar == 0 {
		cfg.hostPar = p
	}
	cfg.hosts = []string{u.Host}
	for _, h := range strings.FieldsFunc(hosts, func(r rune) bool { return r == ',' || r == ' ' }) {
		if hu, err := url.Parse(h); err == nil && hu.Host != "" {
			h = hu.Host
		}
		if !slices.Contains(cfg.hosts, h) {
			cfg.hosts = append(cfg.hosts, h)
		}
	}
	for _, h := range cfg.hosts {
		name := (&url.URL{Host: h}).Hostname()
		if !slices.Contains(cfg.allowed, name) {
			cfg.allowed = append(cfg.allowed, name)
		}
	}
	return cfg, nil
}
