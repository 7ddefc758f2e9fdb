// Metrics: watch a crawl through Stats, a periodic progress log line, and
// Prometheus metrics served while it runs.
//
//	go run ./_examples/metrics [-addr 127.0.0.1:9090] [URL]
//
// Without a URL it crawls a small site it serves itself on 127.0.0.1. The
// metrics are served at http://ADDR/metrics (a free port by default); at the
// end the program reads them once and prints the magpie_ lines.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/_examples/internal/site"
	mprom "github.com/magpiecrawl/magpie/metrics/prometheus"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "where to serve /metrics")
	flag.Parse()
	start := flag.Arg(0)
	if start == "" {
		srv := site.Start()
		defer srv.Close()
		start = srv.URL + "/page/1"
	}
	u, err := url.Parse(start)
	if err != nil {
		log.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := magpie.NewCollector(
		magpie.Async(),
		magpie.AllowedDomains(u.Hostname()),
		magpie.Logger(logger),
		magpie.ProgressInterval(100*time.Millisecond), // a "progress" line on stderr
	)
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 2, Delay: 20 * time.Millisecond}); err != nil {
		log.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnHTML("h1", func(e *magpie.HTMLElement) { e.Emit(e.Text) })

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", mprom.Handler(c))
	metrics := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = metrics.Serve(ln) }()
	defer metrics.Close()
	fmt.Fprintf(os.Stderr, "metrics on http://%s/metrics\n", ln.Addr())

	if err := c.Visit(start); err != nil {
		log.Fatal(err)
	}
	c.Wait()

	fmt.Println(c.Stats())
	res, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "magpie_") {
			fmt.Println(line)
		}
	}
}
