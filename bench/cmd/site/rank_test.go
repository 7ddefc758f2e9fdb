package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRankLinks: in rank mode every link to a page of the site carries that
// page's rank as ?rank=N, the rank is the same on every page that links it
// and spread over [0, maxRank); without -rank no link has a query, and the
// pages are the ones rank mode serves but for the queries (the rng draws
// the same links).
func TestRankLinks(t *testing.T) {
	cfg := config{pages: 50, sizeKB: 1, links: 10, seed: 5, hosts: 3, rank: true}
	bases := testBases(cfg.hosts)
	g := newGenerator(cfg, bases)
	plain := cfg
	plain.rank = false
	gp := newGenerator(plain, bases)
	hostOf := map[string]int{}
	for h, b := range bases {
		hostOf[strings.TrimPrefix(b, "http://")] = h
	}
	ranks := map[int]bool{}
	for h := range cfg.hosts {
		for i := range cfg.pages {
			links, plainLinks := hrefs(g.page(h, i)), hrefs(gp.page(h, i))
			if len(links) != len(plainLinks) {
				t.Fatalf("page(%d, %d): %d links in rank mode, %d without", h, i, len(links), len(plainLinks))
			}
			for k, l := range links {
				base, _ := url.Parse(bases[h] + pagePath(i))
				u, err := base.Parse(l)
				if err != nil {
					t.Fatalf("page(%d, %d) link %q: %v", h, i, l, err)
				}
				if pu, _ := base.Parse(plainLinks[k]); pu.RawQuery != "" || pu.Path != u.Path || pu.Host != u.Host {
					t.Errorf("page(%d, %d) link %d: %q in rank mode, %q without: want the same page, no query without", h, i, k, l, plainLinks[k])
				}
				if u.Host == "external.invalid" {
					continue
				}
				n, kind := g.pageNumber(u.Path)
				if kind != kindPage {
					t.Fatalf("page(%d, %d) links %q, not a page", h, i, l)
				}
				th := hostOf[u.Host]
				got, err := strconv.Atoi(u.Query().Get("rank"))
				if err != nil || got != g.rank(th, n) {
					t.Errorf("page(%d, %d) link %q: rank %q, want %d", h, i, l, u.Query().Get("rank"), g.rank(th, n))
				}
				ranks[got] = true
			}
		}
	}
	for k := range ranks {
		if k < 0 || k >= maxRank {
			t.Errorf("rank %d outside [0, %d)", k, maxRank)
		}
	}
	if len(ranks) < cfg.hosts*cfg.pages*9/10 {
		t.Errorf("%d distinct ranks over %d pages: want nearly one each", len(ranks), cfg.hosts*cfg.pages)
	}
}

// TestShareOf: a crawl that fetched the top N of what it knew scores 1,
// one that fetched the bottom N scores 0, and a mix counts its top pages.
func TestShareOf(t *testing.T) {
	g := newGenerator(config{pages: 200, links: 10, seed: 3, hosts: 2, rank: true}, testBases(2))
	var all []target
	for h := range 2 {
		for i := range 200 {
			all = append(all, target{h, i})
		}
	}
	// By rank, highest first.
	slices.SortFunc(all, func(a, b target) int { return g.rank(b.h, b.i) - g.rank(a.h, a.i) })
	known := map[target]bool{}
	for _, p := range all {
		known[p] = true
	}
	set := func(ps []target) map[target]bool {
		m := map[target]bool{}
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	tests := []struct {
		name string
		got  []target
		want int // TopFetched
	}{
		{"top 50", all[:50], 50},
		{"bottom 50", all[len(all)-50:], 0},
		{"top 30 and bottom 20", append(slices.Clone(all[:30]), all[len(all)-20:]...), 30},
		{"nothing", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := shareOf(g, set(tt.got), known)
			if rep.Fetched != len(tt.got) || rep.Known != len(known) || rep.TopFetched != tt.want {
				t.Errorf("shareOf = %+v, want fetched %d, known %d, top fetched %d", rep, len(tt.got), len(known), tt.want)
			}
			if len(tt.got) > 0 && rep.Share != float64(tt.want)/float64(len(tt.got)) {
				t.Errorf("share %v, want %d/%d", rep.Share, tt.want, len(tt.got))
			}
		})
	}
}

// TestSimulateRank: the best-first crawl of the site fetches n pages and
// beats the crawl blind to rank, which scores about what chance gives.
func TestSimulateRank(t *testing.T) {
	cfg := config{pages: 2000, links: 10, seed: 1, hosts: 4, rank: true}
	r := newLinkResolver(newGenerator(cfg, simBases(cfg.hosts)))
	best, fifo := simulateRank(r, 300, true), simulateRank(r, 300, false)
	if best.Fetched != 300 || fifo.Fetched != 300 {
		t.Fatalf("fetched %d best-first, %d FIFO; want 300 each", best.Fetched, fifo.Fetched)
	}
	if best.Share < 0.6 || fifo.Share > 0.5 || best.Share <= fifo.Share {
		t.Errorf("share best-first %.2f (knew %d), FIFO %.2f (knew %d): want best-first >= 0.6 > 0.5 >= FIFO",
			best.Share, best.Known, fifo.Share, fifo.Known)
	}
	var b strings.Builder
	if err := runIdealRank(&b, cfg, 300); err != nil {
		t.Fatalf("runIdealRank: %v", err)
	}
	var res idealRankResult
	if err := json.Unmarshal([]byte(b.String()), &res); err != nil {
		t.Fatalf("output %q: %v", b.String(), err)
	}
	if res.N != 300 || res.BestFirst != best.Share || res.FIFO != fifo.Share || res.BestFirstKnown != best.Known {
		t.Errorf("runIdealRank = %+v, want the simulations' figures (%+v, %+v)", res, best, fifo)
	}
	cfg.rank = false
	if err := runIdealRank(io.Discard, cfg, 300); err == nil {
		t.Errorf("runIdealRank without -rank: error nil")
	}
}

// TestStatsRank: /_stats in rank mode reports the pages fetched (the seed
// left out) and those their links name, as rankShare counts them.
func TestStatsRank(t *testing.T) {
	cfg := config{pages: 30, sizeKB: 1, links: 6, seed: 2, hosts: 1, rank: true}
	srv := httptest.NewUnstartedServer(nil)
	bases := []string{"http://" + srv.Listener.Addr().String()}
	gen := newGenerator(cfg, bases)
	st := newSiteStats(cfg, bases, gen)
	srv.Config.Handler = handler(cfg, gen, st, 0)
	srv.Start()
	t.Cleanup(srv.Close)
	get := func(path string) []byte {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	for _, p := range []string{"/", "/p/3?rank=1", "/p/3", "/p/7", "/robots.txt", "/nope"} {
		get(p)
	}
	var r Report
	if err := json.Unmarshal(get("/_stats"), &r); err != nil {
		t.Fatalf("/_stats: %v", err)
	}
	want := rankShare(newLinkResolver(gen), []target{{0, 0}, {0, 3}, {0, 7}})
	if r.Rank == nil || *r.Rank != want || want.Fetched != 2 || want.Known < 2 {
		t.Errorf("/_stats rank = %+v, want %+v (2 pages fetched besides the seed)", r.Rank, want)
	}
	get("/_reset")
	r = Report{}
	if err := json.Unmarshal(get("/_stats"), &r); err != nil {
		t.Fatalf("/_stats: %v", err)
	}
	if r.Rank == nil || r.Rank.Fetched != 0 {
		t.Errorf("/_stats rank after /_reset = %+v, want nothing fetched", r.Rank)
	}
}

// TestStatsAddrGaps: with -addr-gap the site records the page starts of
// every host of one address together, robots.txt left out, and counts the
// gaps shorter than -addr-gap.
func TestStatsAddrGaps(t *testing.T) {
	for _, tt := range []struct {
		name      string
		gapMS     float64
		wantBelow int
	}{
		// Requests made one after another are more than 1 ns apart and
		// less than an hour.
		{"all gaps long", 1e-6, 0},
		{"all gaps short", 3.6e6, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{pages: 5, sizeKB: 1, links: 4, seed: 1, hosts: 2, addrGap: durationMS(tt.gapMS)}
			srvs := []*httptest.Server{httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)}
			bases := []string{"http://" + srvs[0].Listener.Addr().String(), "http://" + srvs[1].Listener.Addr().String()}
			gen := newGenerator(cfg, bases)
			st := newSiteStats(cfg, bases, gen)
			for h, srv := range srvs {
				srv.Config.Handler = handler(cfg, gen, st, h)
				srv.Start()
				t.Cleanup(srv.Close)
			}
			get := func(base, path string) []byte {
				t.Helper()
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return b
			}
			get(bases[0], "/_reset")
			get(bases[0], "/")
			get(bases[1], "/robots.txt")
			get(bases[1], "/p/1")
			get(bases[0], "/p/2")
			var r Report
			if err := json.Unmarshal(get(bases[1], "/_stats"), &r); err != nil {
				t.Fatalf("/_stats: %v", err)
			}
			if len(r.Addrs) != 1 {
				t.Fatalf("/_stats addrs = %+v, want one address for both hosts", r.Addrs)
			}
			a := r.Addrs[0]
			if a.Addr != "127.0.0.1" || a.PageStarts != 3 || a.GapsBelow != tt.wantBelow || a.MinGapMS <= 0 || a.BelowMS != tt.gapMS {
				t.Errorf("addr = %+v, want 127.0.0.1 with 3 page starts, %d gaps below %v ms, a positive min gap", a, tt.wantBelow, tt.gapMS)
			}
			get(bases[0], "/_reset")
			r = Report{}
			if err := json.Unmarshal(get(bases[0], "/_stats"), &r); err != nil {
				t.Fatalf("/_stats: %v", err)
			}
			if len(r.Addrs) != 0 {
				t.Errorf("/_stats addrs after /_reset = %+v, want none", r.Addrs)
			}
		})
	}
}

func durationMS(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
