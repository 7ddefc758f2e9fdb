package main

import (
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// stats records what crawlers do to every host of the site. Safe for
// concurrent use.
type stats struct {
	hosts []*hostStats
	// ranker, set in rank mode (-rank), computes Report.Rank from the
	// pages fetched; addrs, set by -addr-gap, records page starts by
	// address. Both are set before the site serves.
	ranker *linkResolver
	addrs  *addrStats
	// mu guards inflight and maxInflight, counted across all hosts.
	mu          sync.Mutex
	inflight    int
	maxInflight int
}

// hostStats records what crawlers do to one host.
type hostStats struct {
	base   string
	parent *stats
	// mu guards every field below.
	mu          sync.Mutex
	paths       map[string]int
	requests    int
	robots      int
	inflight    int
	maxInflight int
	pageStarts  int
	first, last time.Time
	minGap      time.Duration // meaningful once pageStarts >= 2
	gaps        []time.Duration
	conns       int
}

func newStats(bases []string) *stats {
	s := &stats{}
	for _, b := range bases {
		s.hosts = append(s.hosts, &hostStats{base: b, parent: s, paths: map[string]int{}})
	}
	return s
}

// newSiteStats returns the stats of the site cfg describes, served by gen
// at bases, with the rank and address records cfg asks for.
func newSiteStats(cfg config, bases []string, gen *generator) *stats {
	s := newStats(bases)
	if cfg.rank {
		s.ranker = newLinkResolver(gen)
	}
	if cfg.addrGap > 0 {
		s.addrs = &addrStats{gap: cfg.addrGap, m: map[string]*addrStat{}}
	}
	return s
}

func (s *stats) reset() {
	if s.addrs != nil {
		s.addrs.reset()
	}
	s.mu.Lock()
	s.maxInflight = s.inflight
	s.mu.Unlock()
	for _, h := range s.hosts {
		h.mu.Lock()
		h.paths = map[string]int{}
		h.requests, h.robots, h.pageStarts, h.conns = 0, 0, 0, 0
		h.maxInflight = h.inflight
		h.first, h.last, h.minGap = time.Time{}, time.Time{}, 0
		h.gaps = nil
		h.mu.Unlock()
	}
}

func (h *hostStats) newConn() {
	h.mu.Lock()
	h.conns++
	h.mu.Unlock()
}

// begin records the start of a request for path and returns the function
// that records its end. Start gaps are measured between page requests only:
// robots.txt is fetched outside politeness limits by design in most crawlers.
func (h *hostStats) begin(path string) (end func()) {
	now := time.Now()
	h.mu.Lock()
	h.requests++
	h.paths[path]++
	if path == "/robots.txt" {
		h.robots++
	} else {
		if h.pageStarts > 0 {
			gap := now.Sub(h.last)
			if h.pageStarts == 1 || gap < h.minGap {
				h.minGap = gap
			}
			h.gaps = append(h.gaps, gap)
		} else {
			h.first = now
		}
		h.pageStarts++
		h.last = now
	}
	h.inflight++
	h.maxInflight = max(h.maxInflight, h.inflight)
	h.mu.Unlock()

	p := h.parent
	p.mu.Lock()
	p.inflight++
	p.maxInflight = max(p.maxInflight, p.inflight)
	p.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.inflight--
		h.mu.Unlock()
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
	}
}

// HostReport is the JSON form of one host's figures.
type HostReport struct {
	Base     string `json:"base"`
	Requests int    `json:"requests"`
	// Distinct counts distinct paths requested, robots.txt included.
	Distinct int `json:"distinct"`
	// Duplicates counts requests beyond the first for each path,
	// robots.txt excluded.
	Duplicates  int     `json:"duplicates"`
	Robots      int     `json:"robots"`
	MaxInflight int     `json:"max_inflight"`
	PageStarts  int     `json:"page_starts"`
	MinGapMS    float64 `json:"min_gap_ms"` // -1 when fewer than two page requests
	// P05GapMS and MedianGapMS are the 5th percentile and median of the
	// gaps between consecutive page request starts; -1 when there are none.
	// A single small gap can be client-side jitter; a small P05 cannot.
	P05GapMS    float64 `json:"p05_gap_ms"`
	MedianGapMS float64 `json:"median_gap_ms"`
	SpanS       float64 `json:"span_s"` // first to last page request start
	NewConns    int     `json:"new_conns"`
}

// Report is the JSON served at /_stats.
type Report struct {
	Hosts []HostReport `json:"hosts"`
	// Totals: sums, except MaxInflight (all hosts together), MinGapMS (the
	// smallest over hosts), P05GapMS and MedianGapMS (over the gaps of all
	// hosts pooled; each gap is still between starts on one host) and SpanS
	// (the longest).
	Total HostReport `json:"total"`
	// Rank is the share of the top-ranked known pages fetched (rank mode).
	Rank *RankReport `json:"rank,omitempty"`
	// Addrs are the page starts by address (-addr-gap), by address.
	Addrs []AddrReport `json:"addrs,omitempty"`
}

func (s *stats) report() Report {
	var r Report
	r.Total.MinGapMS, r.Total.P05GapMS, r.Total.MedianGapMS = -1, -1, -1
	var all []time.Duration
	var fetched []target
	for hi, h := range s.hosts {
		h.mu.Lock()
		if s.ranker != nil {
			for p := range h.paths {
				if i, kind := s.ranker.g.pageNumber(p); kind == kindPage {
					fetched = append(fetched, target{hi, i})
				}
			}
		}
		hr := HostReport{
			Base: h.base, Requests: h.requests, Distinct: len(h.paths), Robots: h.robots,
			MaxInflight: h.maxInflight, PageStarts: h.pageStarts, MinGapMS: -1, NewConns: h.conns,
			P05GapMS: -1, MedianGapMS: -1,
		}
		for p, n := range h.paths {
			if n > 1 && p != "/robots.txt" {
				hr.Duplicates += n - 1
			}
		}
		if h.pageStarts >= 2 {
			hr.MinGapMS = ms(h.minGap)
			hr.SpanS = h.last.Sub(h.first).Seconds()
			g := slices.Clone(h.gaps)
			all = append(all, g...)
			slices.Sort(g)
			hr.P05GapMS = ms(g[len(g)*5/100])
			hr.MedianGapMS = ms(g[len(g)/2])
		}
		h.mu.Unlock()
		r.Hosts = append(r.Hosts, hr)

		t := &r.Total
		t.Requests += hr.Requests
		t.Distinct += hr.Distinct
		t.Duplicates += hr.Duplicates
		t.Robots += hr.Robots
		t.PageStarts += hr.PageStarts
		t.NewConns += hr.NewConns
		t.SpanS = max(t.SpanS, hr.SpanS)
		t.MinGapMS = minGap(t.MinGapMS, hr.MinGapMS)
	}
	if len(all) > 0 {
		slices.Sort(all)
		r.Total.P05GapMS = ms(all[len(all)*5/100])
		r.Total.MedianGapMS = ms(all[len(all)/2])
	}
	s.mu.Lock()
	r.Total.MaxInflight = s.maxInflight
	s.mu.Unlock()
	r.Total.Base = "all"
	if s.ranker != nil {
		rank := rankShare(s.ranker, fetched)
		r.Rank = &rank
	}
	if s.addrs != nil {
		r.Addrs = s.addrs.report()
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// minGap returns the smaller of two gaps, where -1 means none.
func minGap(a, b float64) float64 {
	if a < 0 || (b >= 0 && b < a) {
		return b
	}
	return a
}

func (s *stats) json() []byte {
	b, err := json.Marshal(s.report())
	if err != nil {
		// A struct of numbers and strings always marshals.
		return []byte(`{"error":"marshal"}`)
	}
	return b
}
