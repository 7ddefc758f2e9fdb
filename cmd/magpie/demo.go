package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/magpiecrawl/magpie"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parallel := fs.Int("parallel", 4, "requests in flight to the demo host")
	delay := fs.Duration("delay", 0, "least time between two request starts")
	latency := fs.Duration("latency", 20*time.Millisecond, "time the demo server takes per request")
	quiet := fs.Bool("quiet", false, "no live progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	base, shutdown, err := serveSite(*latency)
	if err != nil {
		return err
	}
	defer shutdown()
	fmt.Fprintf(stderr, "magpie demo: serving the sample shop at %s\n", base)
	fmt.Fprintf(stderr, "crawling it with %d in flight per host, delay %v (robots.txt obeyed, other domains skipped)\n", *parallel, *delay)

	t := &tally{}
	began := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	if *quiet {
		close(done)
	} else {
		go func() {
			defer close(done)
			progress(stderr, t, began, 100*time.Millisecond, stop, true, nil)
		}()
	}
	// The demo site is on loopback: the guard lets only that through.
	discard := func(context.Context, *magpie.Item) error { return nil }
	err = crawl(ctx, crawlConfig{start: base, depth: 0, parallel: *parallel, delay: *delay, allowLoopback: true}, t, discard)
	close(stop)
	<-done
	summary(stderr, t, time.Since(began))
	pages, _ := t.snapshot()
	fmt.Fprintf(stdout, "demo: %d pages crawled from the embedded site\n", pages)
	return err
}
