package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// serveSite starts cfg's site on httptest servers, a listener per host, and
// returns the base URLs.
func serveSite(t *testing.T, cfg config) []string {
	t.Helper()
	srvs := make([]*httptest.Server, cfg.hosts)
	bases := make([]string, cfg.hosts)
	for h := range srvs {
		srvs[h] = httptest.NewUnstartedServer(nil)
		bases[h] = "http://" + srvs[h].Listener.Addr().String()
	}
	gen, st := newGenerator(cfg, bases), newStats(bases)
	for h, srv := range srvs {
		srv.Config.Handler = handler(cfg, gen, st, h)
		srv.Start()
		t.Cleanup(srv.Close)
	}
	return bases
}

// httpCrawl crawls the site at bases over HTTP the way the crawlers do:
// from host 0's "/", links resolved against the page's URL, only the site's
// hosts, each host's robots.txt honoured. It returns each page fetched and
// the pages its body links to, in document order, duplicates included.
func httpCrawl(t *testing.T, bases []string) map[target][]target {
	t.Helper()
	hostOf := map[string]int{}
	for h, b := range bases {
		hostOf[strings.TrimPrefix(b, "http://")] = h
	}
	get := func(u string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		return resp.StatusCode, b
	}
	disallow := map[int][]string{}
	robots := func(h int) []string {
		if d, ok := disallow[h]; ok {
			return d
		}
		d := []string{}
		_, body := get(bases[h] + "/robots.txt")
		sc := bufio.NewScanner(strings.NewReader(string(body)))
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "Disallow:"); ok && strings.TrimSpace(p) != "" {
				d = append(d, strings.TrimSpace(p))
			}
		}
		disallow[h] = d
		return d
	}
	out := map[target][]target{}
	todo := []string{bases[0] + "/"}
	seen := map[string]bool{todo[0]: true}
	for len(todo) > 0 {
		raw := todo[0]
		todo = todo[1:]
		u, _ := url.Parse(raw)
		h := hostOf[u.Host]
		i := 0
		if p, ok := strings.CutPrefix(u.Path, "/p/"); ok {
			i = atoi(t, p)
		}
		code, body := get(raw)
		links := []target{}
		if code == http.StatusOK {
			for _, l := range hrefs(body) {
				v, err := u.Parse(l)
				if err != nil {
					t.Fatalf("%s links %q: %v", raw, l, err)
				}
				th, ok := hostOf[v.Host]
				if !ok || slices.ContainsFunc(robots(th), func(p string) bool { return strings.HasPrefix(v.Path, p) }) {
					continue
				}
				ti := 0
				if p, ok := strings.CutPrefix(v.Path, "/p/"); ok {
					ti = atoi(t, p)
				} else if v.Path != "/" {
					t.Fatalf("%s links %q, a path the site does not serve", raw, l)
				}
				links = append(links, target{th, ti})
				if !seen[v.String()] {
					seen[v.String()] = true
					todo = append(todo, v.String())
				}
			}
		}
		out[target{h, i}] = links
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("page number %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestIdealFetchesWhatTheSiteServes: the simulation fetches exactly the
// pages a robots.txt-honouring crawl of the served site reaches, and sees on
// each page the links its body carries, in document order. The simulation
// runs on stand-in base URLs, as -ideal does: the links must not depend on
// their text.
func TestIdealFetchesWhatTheSiteServes(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
	}{
		{"robots", config{pages: 12, sizeKB: 1, links: 10, seed: 5, hosts: 6, robots: true}},
		{"errors", config{pages: 20, sizeKB: 1, links: 8, seed: 11, hosts: 3, errorRate: 0.2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served := httpCrawl(t, serveSite(t, tt.cfg))
			r := newLinkResolver(newGenerator(tt.cfg, simBases(tt.cfg.hosts)))
			simulated := map[target]bool{}
			res := simulateIdeal(r.g, time.Second, false, func(p target, _ time.Duration) {
				if simulated[p] {
					t.Errorf("page %v fetched twice", p)
				}
				simulated[p] = true
			})
			for p, links := range served {
				if !simulated[p] {
					t.Errorf("the site serves page %v, the simulation never fetches it", p)
				}
				want := links
				if r.g.fails(p.h, p.i) {
					want = nil // a 500 carries no links, and the simulation follows none
				} else if got := r.pageTargets(p.h, p.i); !slices.Equal(got, want) {
					t.Errorf("page %v: simulation's links %v, the served page's %v", p, got, want)
				}
			}
			for p := range simulated {
				if _, ok := served[p]; !ok {
					t.Errorf("the simulation fetches %v, which a crawl of the site never reaches", p)
				}
			}
			failed := 0
			for p := range served {
				if r.g.fails(p.h, p.i) {
					failed++
				}
			}
			if res.Fetches != len(served) || res.Pages != len(served)-failed {
				t.Errorf("fetches %d, pages %d; want %d and %d", res.Fetches, res.Pages, len(served), len(served)-failed)
			}
			if tt.cfg.errorRate > 0 && failed == 0 {
				t.Errorf("no page failed at error rate %v: the case tests nothing", tt.cfg.errorRate)
			}
		})
	}
}

// TestIdealOneHost: one host of N pages takes (N-1)×Delay, N×Delay when
// robots.txt takes a turn first.
func TestIdealOneHost(t *testing.T) {
	const pages, delay = 25, 2 * time.Second
	tests := []struct {
		name       string
		robots     bool
		robotsFree bool
		want       time.Duration
		rule       string
	}{
		{"no robots.txt", false, false, (pages - 1) * delay, "none"},
		{"robots.txt a turn", true, false, pages * delay, "delay"},
		{"robots.txt free", true, true, (pages - 1) * delay, "free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{pages: pages, sizeKB: 1, links: 10, seed: 3, hosts: 1, robots: tt.robots}
			res := simulateIdeal(newGenerator(cfg, simBases(1)), delay, tt.robotsFree, nil)
			if res.Pages != pages || res.MakespanS != tt.want.Seconds() || res.RobotsRule != tt.rule {
				t.Errorf("pages %d, makespan %vs, rule %q; want %d, %vs, %q", res.Pages, res.MakespanS, res.RobotsRule, pages, tt.want.Seconds(), tt.rule)
			}
			if want := pages / tt.want.Seconds(); res.PagesPerS != want {
				t.Errorf("pages/s %v, want %v", res.PagesPerS, want)
			}
		})
	}
}

// TestIdealIsGreedyAndPolite checks every fetch of a many-host simulation
// against the rules, from the fetch log alone: a host's starts are Delay
// apart (its first page Delay after robots.txt, sent when the host became
// known), its pages go in the order they became known, and each starts the
// moment both its host and its link allow: not before, not later.
func TestIdealIsGreedyAndPolite(t *testing.T) {
	const delay = time.Second
	for _, robotsFree := range []bool{false, true} {
		cfg := config{pages: 8, sizeKB: 1, links: 10, seed: 2, hosts: 300, robots: true}
		r := newLinkResolver(newGenerator(cfg, simBases(cfg.hosts)))
		type fetch struct {
			p  target
			at time.Duration
		}
		var log []fetch
		res := simulateIdeal(r.g, delay, robotsFree, func(p target, at time.Duration) { log = append(log, fetch{p, at}) })
		if res.Hosts != cfg.hosts || res.Pages != cfg.hosts*cfg.pages || res.Robots != cfg.hosts {
			t.Fatalf("robotsFree %v: %d hosts, %d pages, %d robots.txt; want every page of every host", robotsFree, res.Hosts, res.Pages, res.Robots)
		}
		// known[p]: when p was first linked, and in which order (links
		// found at the same instant are ordered as the fetches found them).
		type seenAt struct {
			at  time.Duration
			seq int
		}
		known := map[target]seenAt{{0, 0}: {0, 0}}
		hostKnown := map[int]time.Duration{0: 0}
		for k, f := range log {
			if k > 0 && f.at < log[k-1].at {
				t.Fatalf("fetch %d at %v, before fetch %d at %v", k, f.at, k-1, log[k-1].at)
			}
			for _, p := range r.pageTargets(f.p.h, f.p.i) {
				if _, ok := known[p]; !ok {
					known[p] = seenAt{f.at, len(known)}
				}
				if _, ok := hostKnown[p.h]; !ok {
					hostKnown[p.h] = f.at
				}
			}
		}
		byHost := map[int][]fetch{}
		for _, f := range log {
			byHost[f.p.h] = append(byHost[f.p.h], f)
		}
		for h, fs := range byHost {
			next := hostKnown[h]
			if !robotsFree {
				next += delay
			}
			for k, f := range fs {
				want := max(next, known[f.p].at)
				if f.at != want {
					t.Fatalf("robotsFree %v: host %d's fetch %d (%v) at %v, want %v (host free at %v, page known at %v)",
						robotsFree, h, k, f.p, f.at, want, next, known[f.p].at)
				}
				if k > 0 && known[f.p].seq < known[fs[k-1].p].seq {
					t.Fatalf("robotsFree %v: host %d fetched %v before %v, known earlier", robotsFree, h, fs[k-1].p, f.p)
				}
				next = f.at + delay
			}
		}
	}
}

// TestRunIdeal: -ideal prints one JSON line, and refuses what it cannot
// simulate.
func TestRunIdeal(t *testing.T) {
	var b strings.Builder
	cfg := config{pages: 10, sizeKB: 16, links: 10, seed: 1, hosts: 50, robots: true}
	if err := runIdeal(&b, cfg, 2*time.Second, false); err != nil {
		t.Fatalf("runIdeal: %v", err)
	}
	var res idealResult
	if err := json.Unmarshal([]byte(b.String()), &res); err != nil || !strings.HasSuffix(b.String(), "}\n") {
		t.Fatalf("output %q: %v", b.String(), err)
	}
	if res.Pages != 500 || res.HostsPerDelay != 25 || res.PagesPerS <= 0 || res.PagesPerS > res.HostsPerDelay || res.RobotsRule != "delay" {
		t.Errorf("result %+v: want 500 pages, hosts/Delay 25, 0 < pages/s <= 25 with robots.txt a turn", res)
	}
	if err := runIdeal(io.Discard, cfg, 0, false); err == nil {
		t.Errorf("runIdeal with no Delay: error nil")
	}
	cfg.frontier, cfg.hosts = 10, 1
	if err := runIdeal(io.Discard, cfg, time.Second, false); err == nil {
		t.Errorf("runIdeal in hub mode: error nil")
	}
}
