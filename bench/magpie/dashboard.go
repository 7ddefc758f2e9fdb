//go:build !magpie_nodashboard

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/dashboard"
)

// magpie-async-ui (issue 41): magpie-async with the live page mounted on a
// loopback server and one client reading its event stream (a snapshot a
// second: Stats, HostReports, RecentFailures, FrontierHead) for the whole
// crawl, as a browser with the page open does. bench/issue41.sh runs it
// beside magpie-async; run.sh leaves it out of its default crawlers.
func init() {
	impls["magpie-async-ui"] = profiled(crawlMagpieAsyncUI)
}

func crawlMagpieAsyncUI(ctx context.Context, cfg harness.Config, n *harness.Counters) error {
	c, err := newMagpie(ctx, cfg, n, magpie.Async(true), magpie.Workers(cfg.P))
	if err != nil {
		return err
	}
	page := dashboard.New(c)
	srv := httptest.NewServer(page)
	defer srv.Close()
	defer page.Close()
	watchCtx, stopWatching := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var events int
	var watchErr error
	wg.Go(func() { events, watchErr = watch(watchCtx, srv.URL+"/api/events") })
	if err := c.Visit(cfg.Seed); err != nil {
		stopWatching()
		wg.Wait()
		return err
	}
	c.Wait()
	stopWatching()
	wg.Wait()
	if events == 0 {
		return fmt.Errorf("the event stream sent nothing: %v", watchErr)
	}
	return ctx.Err()
}

// watch reads the event stream at u until ctx ends, and counts its events.
func watch(ctx context.Context, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	events := 0
	for sc.Scan() {
		if len(sc.Bytes()) > 5 && string(sc.Bytes()[:5]) == "data:" {
			events++
		}
	}
	return events, sc.Err()
}
