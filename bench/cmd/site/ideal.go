package main

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The ideal a per-host Delay allows on this site, links included (-ideal).
//
// hosts ÷ Delay is the rate of a crawl whose every host is busy from the
// first second to the last. On this site no crawler can get there: a page
// can be fetched only once a fetched page linked it, so hosts start as links
// reach them and a host stands idle while none of its known pages is left.
// simulateIdeal plays the crawl an ideal crawler would make on the very
// links the site serves (generator.links, the code that renders the pages):
//
//   - fetching takes no time, and there are as many workers as there are
//     hosts ready (no CPU, network or worker limit);
//   - a host serves one request at a time, and its request starts are at
//     least Delay apart; a page is fetched the moment it is known and its
//     host allows a start, its host's known pages first come first served
//     (FIFO per host), a page's links discovered in the order the page
//     lists them, at the moment the page is fetched;
//   - with robots (the site's -robots, which the broad scenario pairs with
//     the crawlers' -robots) robots.txt is fetched once per host, the
//     moment the host's first URL is known, as one of the host's requests:
//     its first page starts Delay later (magpie's rule; raw and Colly fetch
//     robots.txt outside the Delay, robotsFree models them). Links to
//     /private/ pages, which robots.txt disallows, are dropped when found
//     (the host's robots.txt is always known by then: such links are
//     relative) and cost no turn;
//   - links to external.invalid are dropped, a page is fetched once however
//     many links name it, and a page that answers 500 (-error-rate) takes
//     its turn, is not counted as a page and yields no links.
//
// The crawl starts at t = 0 with host 0's "/". Its makespan is the start of
// the last request (the last fetch takes no time), so a single host of N
// pages has a makespan of (N-1)×Delay without robots.txt, N×Delay with it;
// pages/s is pages ÷ makespan, the bound for a crawler that takes each
// host's pages in the order it found them (a crawler that knew which page
// unlocks the most hosts could order them better; none does) measured by
// pages ÷ wall-clock time on the same site and Delay.

// idealResult is what -ideal prints, as one line of JSON.
type idealResult struct {
	Hosts int `json:"hosts"` // hosts fetched from
	Pages int `json:"pages"` // pages fetched, 2xx
	// Fetches counts page requests, failed ones included, robots.txt not.
	Fetches   int     `json:"fetches"`
	Robots    int     `json:"robots"` // robots.txt requests
	DelayMS   float64 `json:"delay_ms"`
	MakespanS float64 `json:"makespan_s"`
	PagesPerS float64 `json:"pages_per_s"` // Pages ÷ MakespanS; 0 when the makespan is 0
	// RobotsRule is "delay" (robots.txt is one of its host's requests),
	// "free" (it takes no turn) or "none" (no robots.txt fetched).
	RobotsRule string `json:"robots_rule"`
	// HostsPerDelay is the ideal that ignores links: hosts ÷ Delay.
	HostsPerDelay float64 `json:"hosts_per_delay"`
}

// target is one page of the site: host h, page i.
type target struct{ h, i int }

// linkResolver maps the hrefs generator.links returns to the pages they
// name, the way a crawler restricted to the site's hosts resolves them.
type linkResolver struct {
	g      *generator
	hostOf map[string]int // base URL → host
}

func newLinkResolver(g *generator) *linkResolver {
	r := &linkResolver{g: g, hostOf: make(map[string]int, len(g.bases))}
	for h, b := range g.bases {
		r.hostOf[b] = h
	}
	return r
}

// resolve returns the page href names on page (h, i), and whether a crawler
// that honours robots.txt fetches it at all (external hosts and, in robots
// mode, /private/ pages are not).
func (r *linkResolver) resolve(h int, href string) (target, bool) {
	path := href
	if !strings.HasPrefix(href, "/") {
		rest, ok := strings.CutPrefix(href, "http://")
		if !ok {
			return target{}, false
		}
		host, p, _ := strings.Cut(rest, "/")
		th, ok := r.hostOf["http://"+host]
		if !ok {
			return target{}, false
		}
		h, path = th, "/"+p
	}
	// Rank mode's query (generator.href) names no other page.
	path, _, _ = strings.Cut(path, "?")
	i, kind := r.g.pageNumber(path)
	if kind != kindPage {
		return target{}, false
	}
	return target{h, i}, true
}

// pageTargets returns the pages page (h, i) links to, in document order,
// duplicates included, as the site renders them.
func (r *linkResolver) pageTargets(h, i int) []target {
	links := r.g.links(h, i, r.g.rng(h, i))
	out := make([]target, 0, len(links))
	for _, l := range links {
		if t, ok := r.resolve(h, l); ok {
			out = append(out, t)
		}
	}
	return out
}

// simHost is one host's state in the simulation.
type simHost struct {
	known   []bool // by page number: linked (or the seed)
	queue   []int  // known pages not fetched yet, FIFO
	head    int
	next    time.Duration // earliest start of its next request
	armed   bool          // an event for it is in the heap
	fetched bool          // at least one page request made
}

// simEvent: host h may start a request at t. seq keeps events of the same
// time in the order they were armed.
type simEvent struct {
	t   time.Duration
	seq int
	h   int
}

type simHeap []simEvent

func (q simHeap) Len() int { return len(q) }
func (q simHeap) Less(a, b int) bool {
	if q[a].t != q[b].t {
		return q[a].t < q[b].t
	}
	return q[a].seq < q[b].seq
}
func (q simHeap) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *simHeap) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simHeap) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simulateIdeal runs the ideal crawl of g's site with per-host Delay delay
// (see the comment at the top of this file). robotsFree makes robots.txt
// take no turn of its host; without g.cfg.robots no robots.txt is fetched.
// visit, when not nil, is called for each page fetched, at its start time.
func simulateIdeal(g *generator, delay time.Duration, robotsFree bool, visit func(p target, at time.Duration)) idealResult {
	cfg := g.cfg
	res := idealResult{
		DelayMS:       float64(delay) / float64(time.Millisecond),
		RobotsRule:    "none",
		HostsPerDelay: float64(cfg.hosts) / delay.Seconds(),
	}
	if cfg.robots {
		res.RobotsRule = "delay"
		if robotsFree {
			res.RobotsRule = "free"
		}
	}
	r := newLinkResolver(g)
	hosts := make([]simHost, cfg.hosts)
	var events simHeap
	seq := 0
	arm := func(h int, at time.Duration) {
		hs := &hosts[h]
		if hs.armed || hs.head == len(hs.queue) {
			return
		}
		hs.armed = true
		heap.Push(&events, simEvent{t: max(at, hs.next), seq: seq, h: h})
		seq++
	}
	// learn records that a fetch at now linked p.
	learn := func(p target, now time.Duration) {
		hs := &hosts[p.h]
		if hs.known == nil {
			hs.known = make([]bool, cfg.pages)
			if cfg.robots {
				// robots.txt first, the moment the host is known.
				res.Robots++
				if !robotsFree {
					hs.next = now + delay
				}
			}
		}
		if hs.known[p.i] {
			return
		}
		hs.known[p.i] = true
		hs.queue = append(hs.queue, p.i)
		arm(p.h, now)
	}

	var last time.Duration
	learn(target{0, 0}, 0)
	for events.Len() > 0 {
		e := heap.Pop(&events).(simEvent)
		hs := &hosts[e.h]
		hs.armed = false
		i := hs.queue[hs.head]
		hs.head++
		hs.next = e.t + delay
		if !hs.fetched {
			hs.fetched = true
			res.Hosts++
		}
		res.Fetches++
		last = e.t
		if visit != nil {
			visit(target{e.h, i}, e.t)
		}
		if !g.fails(e.h, i) {
			res.Pages++
			for _, p := range r.pageTargets(e.h, i) {
				learn(p, e.t)
			}
		}
		arm(e.h, e.t)
	}
	res.MakespanS = last.Seconds()
	if last > 0 {
		res.PagesPerS = float64(res.Pages) / last.Seconds()
	}
	return res
}

// simBases are stand-ins for the site's base URLs in a simulation: the
// links a page carries do not depend on the bases' text, only on which host
// each names.
func simBases(n int) []string {
	b := make([]string, n)
	for h := range b {
		b[h] = fmt.Sprintf("http://h%d.sim.invalid", h)
	}
	return b
}

// runIdeal implements -ideal: the simulated ideal of cfg's site at delay,
// as one line of JSON on w.
func runIdeal(w io.Writer, cfg config, delay time.Duration, robotsFree bool) error {
	if delay <= 0 {
		return errors.New("-ideal must be a positive duration")
	}
	if cfg.frontier > 0 {
		return errors.New("-ideal does not apply to hub mode (-frontier)")
	}
	res := simulateIdeal(newGenerator(cfg, simBases(cfg.hosts)), delay, robotsFree, nil)
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
