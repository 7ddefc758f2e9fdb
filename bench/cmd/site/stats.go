package main

import (
	"encoding/json"
	"sync"
	"time"
)

// stats records what crawlers do to every host of the site. Safe for
// concurrent use.
type stats struct {
	hosts []*hostStats
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
	conns       int
}

func newStats(bases []string) *stats {
	s := &stats{}
	for _, b := range bases {
		s.hosts = append(s.hosts, &hostStats{base: b, parent: s, paths: map[string]int{}})
	}
	return s
}

func (s *stats) reset() {
	s.mu.Lock()
	s.maxInflight = s.inflight
	s.mu.Unlock()
	for _, h := range s.hosts {
		h.mu.Lock()
		h.paths = map[string]int{}
		h.requests, h.robots, h.pageStarts, h.conns = 0, 0, 0, 0
		h.maxInflight = h.inflight
		h.first, h.last, h.minGap = time.Time{}, time.Time{}, 0
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
			if gap := now.Sub(h.last); h.pageStarts == 1 || gap < h.minGap {
				h.minGap = gap
			}
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
	SpanS       float64 `json:"span_s"`     // first to last page request start
	NewConns    int     `json:"new_conns"`
}

// Report is the JSON served at /_stats.
type Report struct {
	Hosts []HostReport `json:"hosts"`
	// Totals: sums, except MaxInflight (all hosts together), MinGapMS (the
	// smallest over hosts, -1 if none) and SpanS (the longest).
	Total HostReport `json:"total"`
}

func (s *stats) report() Report {
	var r Report
	r.Total.MinGapMS = -1
	for _, h := range s.hosts {
		h.mu.Lock()
		hr := HostReport{
			Base: h.base, Requests: h.requests, Distinct: len(h.paths), Robots: h.robots,
			MaxInflight: h.maxInflight, PageStarts: h.pageStarts, MinGapMS: -1, NewConns: h.conns,
		}
		for p, n := range h.paths {
			if n > 1 && p != "/robots.txt" {
				hr.Duplicates += n - 1
			}
		}
		if h.pageStarts >= 2 {
			hr.MinGapMS = float64(h.minGap) / float64(time.Millisecond)
			hr.SpanS = h.last.Sub(h.first).Seconds()
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
		if hr.MinGapMS >= 0 && (t.MinGapMS < 0 || hr.MinGapMS < t.MinGapMS) {
			t.MinGapMS = hr.MinGapMS
		}
	}
	s.mu.Lock()
	r.Total.MaxInflight = s.maxInflight
	s.mu.Unlock()
	r.Total.Base = "all"
	return r
}

func (s *stats) json() []byte {
	b, err := json.Marshal(s.report())
	if err != nil {
		// A struct of numbers and strings always marshals.
		return []byte(`{"error":"marshal"}`)
	}
	return b
}
