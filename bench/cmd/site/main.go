// Command site serves a deterministic synthetic web site on 127.0.0.1 for
// crawler benchmarks, and records what the crawler did to it.
//
// Every page is a function of (-seed, host, page number), so two runs with the
// same flags serve byte-identical sites. Page 0 of each host is "/", page i is
// "/p/i". Page i links to page i+1 (so every page is reachable from the first
// host's "/"), to K-3 pseudo-random pages (in multi-host mode some of them on
// other hosts, and the last page of host h links to "/" of host h+1), repeats
// one of its links (a duplicate) and links one external URL on a host that is
// never served (external.invalid): a correct crawler restricted to 127.0.0.1
// fetches each page exactly once and never leaves the site.
//
// The server counts, per host, requests per path (so duplicate fetches show),
// the most requests in flight at once, the smallest gap between two request
// starts, and new TCP connections (each counted at its first crawler request,
// so the control connections are not). GET /_stats returns them as JSON; GET
// /_reset clears them; neither is counted. When every listener is ready the
// base URLs are printed on one line of stdout, separated by spaces.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	pages     int
	sizeKB    int
	links     int
	seed      uint64
	latency   time.Duration
	errorRate float64
	hosts     int
	loopback  bool // hosts on distinct loopback addresses, one port
	// oneListener serves the -loopback hosts from one wildcard listener
	// rather than one listener per address (an open file each).
	oneListener bool
	robots      bool
	frontier    int // hub mode when > 0: leaves behind the hub pages
	hubLinks    int
	// rank mode: links carry their page's rank (see generator.href), and
	// /_stats reports the share of the top-ranked known pages fetched.
	rank bool
	// addrGap, when > 0, makes the site record page request starts by the
	// address each connection came to and count the gaps shorter than it.
	addrGap time.Duration
}

func main() {
	var cfg config
	flag.IntVar(&cfg.pages, "pages", 1000, "pages per host")
	flag.IntVar(&cfg.sizeKB, "size", 16, "approximate page size in KB")
	flag.IntVar(&cfg.links, "links", 10, "links per page (at least 3: next, duplicate, external)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "PRNG seed; same seed and flags serve the same site")
	flag.DurationVar(&cfg.latency, "latency", 0, "delay before each page response")
	flag.Float64Var(&cfg.errorRate, "error-rate", 0, "fraction of pages (fixed by the seed) answered with 500")
	flag.IntVar(&cfg.hosts, "hosts", 1, "number of hosts, each a listener on its own port of 127.0.0.1")
	flag.BoolVar(&cfg.loopback, "loopback", false, "put the hosts on distinct loopback addresses (127.1.0.1, 127.1.0.2, ...) of one port instead, as the hosts of a broad crawl")
	flag.BoolVar(&cfg.oneListener, "one-listener", false, "with -loopback: one listener on the wildcard address of a free port serves every host by the loopback address a connection came to (connections to any other address are closed at once), so that tens of thousands of hosts need no open file each")
	flag.BoolVar(&cfg.robots, "robots", false, "serve a robots.txt that disallows /private/ and link to /private/ pages")
	flag.IntVar(&cfg.frontier, "frontier", 0, "hub mode: serve this many leaf URLs behind hub pages (see hubs.go); 0: the normal site")
	flag.IntVar(&cfg.hubLinks, "hub-links", 5000, "hub mode: links per hub page")
	flag.BoolVar(&cfg.rank, "rank", false, "rank mode: every link to a page carries the page's rank, a number fixed by the seed, as ?rank=N; /_stats adds the share of the highest-ranked pages the crawl knew that it fetched (see rank.go)")
	flag.DurationVar(&cfg.addrGap, "addr-gap", 0, "record page request starts by the address each connection came to (all the hosts of one address together: the ports of 127.0.0.1, or one -loopback address) and count the gaps between two starts at one address shorter than this; /_stats adds them as \"addrs\"")
	idealRank := flag.Int("ideal-rank", 0, "with -rank, do not serve: print, as one line of JSON, the share a crawl fetching this many pages one at a time would reach, taking the highest-ranked known page first and in link order (see rank.go), and exit")
	ideal := flag.Duration("ideal", 0, "do not serve: print, as one line of JSON, the makespan and pages/s of an ideal crawl of this site with this per-host Delay (no fetch time, unlimited workers, pages fetched as links reveal them; see ideal.go) and exit")
	idealRobotsFree := flag.Bool("ideal-robots-free", false, "with -ideal and -robots: robots.txt takes no turn of its host's Delay (raw and Colly); by default it is one of the host's requests (magpie)")
	flag.Parse()
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "site:", err)
		os.Exit(2)
	}
	if *idealRank != 0 {
		if err := runIdealRank(os.Stdout, cfg, *idealRank); err != nil {
			fmt.Fprintln(os.Stderr, "site:", err)
			os.Exit(2)
		}
		return
	}
	if *ideal != 0 || *idealRobotsFree {
		if err := runIdeal(os.Stdout, cfg, *ideal, *idealRobotsFree); err != nil {
			fmt.Fprintln(os.Stderr, "site:", err)
			os.Exit(2)
		}
		return
	}
	if err := run(cfg); err != nil {
		log.Fatalf("site: %v", err)
	}
}

func (c config) check() error {
	switch {
	case c.pages < 1:
		return errors.New("-pages must be at least 1")
	case c.sizeKB < 0:
		return errors.New("-size must not be negative")
	case c.links < 3:
		return errors.New("-links must be at least 3")
	case c.hosts < 1:
		return errors.New("-hosts must be at least 1")
	case c.oneListener && !c.loopback:
		return errors.New("-one-listener needs -loopback")
	case c.loopback && c.hosts > 254*254*126:
		return errors.New("-loopback allows at most 8,128,616 hosts")
	case c.errorRate < 0 || c.errorRate > 1:
		return errors.New("-error-rate must be in [0, 1]")
	case c.latency < 0:
		return errors.New("-latency must not be negative")
	case c.frontier < 0:
		return errors.New("-frontier must not be negative")
	case c.frontier > 0 && (c.hubLinks < 1 || c.hosts != 1):
		return errors.New("-frontier needs -hub-links >= 1 and one host")
	case c.rank && c.frontier > 0:
		return errors.New("-rank does not apply to hub mode (-frontier)")
	case c.addrGap < 0:
		return errors.New("-addr-gap must not be negative")
	}
	return nil
}

func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.oneListener {
		return runOneListener(ctx, cfg)
	}
	lns := make([]net.Listener, cfg.hosts)
	bases := make([]string, cfg.hosts)
	port := "0"
	for h := range lns {
		addr := "127.0.0.1:0"
		if cfg.loopback {
			addr = net.JoinHostPort(loopbackAddr(h), port)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		if cfg.loopback && h == 0 {
			_, port, _ = net.SplitHostPort(ln.Addr().String())
		}
		lns[h] = ln
		bases[h] = "http://" + ln.Addr().String()
	}
	gen := newGenerator(cfg, bases)
	st := newSiteStats(cfg, bases, gen)

	servers := make([]*http.Server, cfg.hosts)
	var wg sync.WaitGroup
	errc := make(chan error, cfg.hosts)
	for h, ln := range lns {
		srv := &http.Server{
			Handler:           handler(cfg, gen, st, h),
			ReadHeaderTimeout: 10 * time.Second,
			ConnContext:       connContext,
		}
		servers[h] = srv
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
	}
	fmt.Println(strings.Join(bases, " "))

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdownCtx)
	}
	wg.Wait()
	return err
}

// loopbackAddr is host h's address in -loopback mode: 127.1.0.1 on, with no
// 0 or 255 in the last two parts (up to 254×254×126 hosts).
func loopbackAddr(h int) string {
	return fmt.Sprintf("127.%d.%d.%d", 1+h/(254*254), 1+h/254%254, 1+h%254)
}

type connKey struct{}

// connInfo is per TCP connection; counted is set by its first crawler request.
type connInfo struct {
	counted atomic.Bool
	host    int // -one-listener: the host the connection's address names, -1 for none
}

// connContext gives each connection a connInfo. A connection is counted
// once, at its first crawler request, so the connections that fetch /_stats
// and /_reset are not.
func connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, new(connInfo))
}

func handler(cfg config, gen *generator, st *stats, h int) http.Handler {
	hs := st.hosts[h]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/_stats":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(st.json())
			return
		case "/_reset":
			st.reset()
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		if ci, ok := r.Context().Value(connKey{}).(*connInfo); ok && !ci.counted.Swap(true) {
			hs.newConn()
		}
		done := hs.begin(r.URL.Path)
		defer done()
		if st.addrs != nil && r.URL.Path != "/robots.txt" {
			st.addrs.start(localAddr(r))
		}

		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write(gen.robotsTxt())
			return
		}
		if cfg.frontier > 0 {
			body, ok := gen.hubPage(r.URL.Path)
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			_, _ = w.Write(body)
			return
		}
		page, kind := gen.pageNumber(r.URL.Path)
		if kind == kindNone {
			http.NotFound(w, r)
			return
		}
		if cfg.latency > 0 {
			t := time.NewTimer(cfg.latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		var body []byte
		switch {
		case kind == kindPrivate:
			body = gen.privatePage(page)
		case gen.fails(h, page):
			http.Error(w, "synthetic failure", http.StatusInternalServerError)
			return
		default:
			body = gen.page(h, page)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	})
}
