package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/magpiecrawl/magpie"
)

func newDemoCommand() *cobra.Command {
	var (
		parallel       int
		delay, latency time.Duration
		quiet          bool
	)
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "serve an embedded sample shop on 127.0.0.1 and crawl it, with live progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, parallel, delay, latency, quiet)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&parallel, "parallel", 4, "requests in flight to the demo host")
	fs.DurationVar(&delay, "delay", 0, "least time between two request starts")
	fs.DurationVar(&latency, "latency", 20*time.Millisecond, "time the demo server takes per request")
	fs.BoolVarP(&quiet, "quiet", "q", false, "no progress")
	return cmd
}

func runDemo(cmd *cobra.Command, parallel int, delay, latency time.Duration, quiet bool) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	base, shutdown, err := serveSite(latency)
	if err != nil {
		return err
	}
	defer shutdown()
	fmt.Fprintf(stderr, "magpie demo: serving the sample shop at %s\n", base)
	fmt.Fprintf(stderr, "crawling it with %d in flight per host, delay %v (robots.txt obeyed, other domains skipped)\n", parallel, delay)

	t := &tally{}
	began := time.Now()
	stop := func() {}
	// The demo site is on loopback: the guard lets only that through.
	cfg := crawlConfig{starts: []string{base}, parallel: parallel, delay: delay, allowLoopback: true, timeout: 10 * time.Second,
		onStart: func(c *magpie.Collector) error {
			stop = startProgress(stderr, t, began, quiet, 100*time.Millisecond, c.Stats)
			return nil
		}}
	discard := func(context.Context, *magpie.Item) error { return nil }
	stats, err := crawl(cmd.Context(), cfg, t, discard)
	stop()
	summary(stderr, t, time.Since(began), stats.Retries)
	fmt.Fprintf(stdout, "demo: %d pages crawled from the embedded site\n", t.snapshot().pages)
	if cmd.Context().Err() != nil {
		return errInterrupted
	}
	return err
}
