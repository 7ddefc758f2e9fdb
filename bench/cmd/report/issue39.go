package main

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The figures of issue 39's scenarios (run.sh's broad, priority and ip):
// what a sampled crawl held at most, the share of the top-ranked pages a
// crawl stopped after N requests fetched, and the page starts at one
// address under politeness by address.

// held is a sampled crawl's most entries leased and requests parked
// (crawl-magpie -sample); MaxLeased is -1 for a crawl with no queue.
type held struct {
	MaxLeased float64 `json:"max_leased"`
	MaxParked float64 `json:"max_parked"`
}

// rankStats is the site's rank figures (site -rank, /_stats).
type rankStats struct {
	Fetched    float64 `json:"fetched"`
	Known      float64 `json:"known"`
	TopFetched float64 `json:"top_fetched"`
	Share      float64 `json:"share"`
}

// addrStats is one address's page starts (site -addr-gap, /_stats).
type addrStats struct {
	Addr       string  `json:"addr"`
	PageStarts float64 `json:"page_starts"`
	MinGapMS   float64 `json:"min_gap_ms"`
	GapsBelow  float64 `json:"gaps_below"`
	BelowMS    float64 `json:"below_ms"`
}

// idealRank is site -ideal-rank's output: the share of a best-first crawl
// and of one blind to rank, fetching N pages one at a time.
type idealRank struct {
	N         int     `json:"n"`
	BestFirst float64 `json:"best_first"`
	FIFO      float64 `json:"fifo"`
}

// issue39 is a row's share of those figures.
type issue39 struct {
	hasHeld        bool
	leased, parked float64 // medians; leased -1 for a crawl with no queue
	hasRank        bool
	rankShare      float64 // medians of the site's rank figures
	known          float64
	rankFetched    float64
	rankIdeal      idealRank
	politeness     string
	hasAddrs       bool
	addrs          float64 // addresses seen (median)
	addrStarts     float64 // page starts at all addresses (median)
	addrMinGap     float64 // smallest gap at any address in any run, ms
	addrBelow      float64 // most gaps below BelowMS at all addresses in one run
	belowMS        float64
}

// summarize39 fills r's issue 39 figures from its records; med is the
// median over them.
func summarize39(r *row, recs []record, med func(func(record) float64) float64) {
	r.rankIdeal = recs[0].IdealRank
	r.politeness = recs[0].Politeness
	for _, rec := range recs {
		r.hasHeld = r.hasHeld || rec.Crawl.Held != nil
		r.hasRank = r.hasRank || rec.Site.Rank != nil
		r.hasAddrs = r.hasAddrs || len(rec.Site.Addrs) > 0
	}
	if r.hasHeld {
		heldOf := func(x record) held {
			if x.Crawl.Held == nil {
				return held{}
			}
			return *x.Crawl.Held
		}
		r.leased = med(func(x record) float64 { return heldOf(x).MaxLeased })
		r.parked = med(func(x record) float64 { return heldOf(x).MaxParked })
	}
	if r.hasRank {
		rankOf := func(x record) rankStats {
			if x.Site.Rank == nil {
				return rankStats{}
			}
			return *x.Site.Rank
		}
		r.rankShare = med(func(x record) float64 { return rankOf(x).Share })
		r.known = med(func(x record) float64 { return rankOf(x).Known })
		r.rankFetched = med(func(x record) float64 { return rankOf(x).Fetched })
	}
	if r.hasAddrs {
		r.addrs = med(func(x record) float64 { return float64(len(x.Site.Addrs)) })
		r.addrStarts = med(func(x record) float64 {
			n := 0.0
			for _, a := range x.Site.Addrs {
				n += a.PageStarts
			}
			return n
		})
		// The worst run, not the median: one start too early breaks the
		// rule.
		r.addrMinGap = -1
		for _, rec := range recs {
			below := 0.0
			for _, a := range rec.Site.Addrs {
				r.addrMinGap = minGap(r.addrMinGap, a.MinGapMS)
				below += a.GapsBelow
				r.belowMS = a.BelowMS
			}
			r.addrBelow = max(r.addrBelow, below)
		}
	}
}

// minGap is the smaller of two gaps, where a negative one means none.
func minGap(a, b float64) float64 {
	if a < 0 || (b >= 0 && b < a) {
		return b
	}
	return a
}

// heldCell is the "most leased / parked" cell of a row.
func (r *row) heldCell() string {
	switch {
	case !r.hasHeld:
		return ""
	case r.leased < 0:
		return fmt.Sprintf("– / %.0f", r.parked)
	}
	return fmt.Sprintf("%.0f / %.0f", r.leased, r.parked)
}

// anyHeld reports whether a row of scenario sc was sampled.
func anyHeld(rows []*row, sc string) bool {
	return slices.ContainsFunc(rows, func(r *row) bool { return r.scenario == sc && r.hasHeld })
}

// anyOld reports whether scenario sc has a row of an older magpie (IMPL@old,
// see OLD_REF in run.sh).
func anyOld(rows []*row, sc string) bool {
	return slices.ContainsFunc(rows, func(r *row) bool { return r.scenario == sc && strings.HasSuffix(r.impl, "@old") })
}

// oldPeer returns the IMPL@old row of r's scenario and label, nil for an
// @old row itself or when none ran.
func oldPeer(rows []*row, r *row) *row {
	if strings.HasSuffix(r.impl, "@old") {
		return nil
	}
	return peer(rows, r, r.impl+"@old")
}

// runsCell is a row's run count, with its failures.
func (r *row) runsCell() string {
	s := fmt.Sprint(r.runs)
	if r.failed > 0 {
		s += fmt.Sprintf(" (%d failed)", r.failed)
	}
	return s
}

// writePriority writes the priority scenario's table: each crawl's share
// of the N highest-ranked pages it knew, against the site's simulated
// best-first and rank-blind crawls of N pages.
func writePriority(bw *bufio.Writer, rows []*row) {
	fmt.Fprintf(bw, "### %s\n\n", titles["priority"])
	fmt.Fprintln(bw, "| scenario | impl | runs | pages | errors | wall s | pages fetched (site, seed excluded) | pages known | share of the top N known fetched | ideal share best-first / rank-blind | share ÷ best-first | ÷ @old share |")
	fmt.Fprintln(bw, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		if r.scenario != "priority" {
			continue
		}
		ideal, vsIdeal, vsOld := "", "", ""
		if r.rankIdeal.N > 0 {
			ideal = fmt.Sprintf("%.2f / %.2f", r.rankIdeal.BestFirst, r.rankIdeal.FIFO)
			vsIdeal = share(r.rankShare, r.rankIdeal.BestFirst)
		}
		if o := oldPeer(rows, r); o != nil {
			vsOld = share(r.rankShare, o.rankShare)
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.3f | %s | %s | %s |\n",
			r.label, r.impl, r.runsCell(), r.pages, r.errs, r.wall, r.rankFetched, r.known, r.rankShare, ideal, vsIdeal, vsOld)
	}
	fmt.Fprintln(bw)
}

// writeIP writes the ip scenario's table: the page starts at each address,
// the smallest gap between two of them and the gaps shorter than the Delay
// (in the worst run), beside the per-host figures.
func writeIP(bw *bufio.Writer, rows []*row) {
	below := "Delay"
	for _, r := range rows {
		if r.scenario == "ip" && r.belowMS > 0 {
			below = fmt.Sprintf("%g ms", r.belowMS)
			break
		}
	}
	fmt.Fprintf(bw, "### %s\n\n", titles["ip"])
	fmt.Fprintf(bw, "| scenario | impl | politeness | runs | pages | errors | dup fetches | wall s | pages/s | addresses | page starts | smallest gap at an address ms (worst run) | gaps < %s at an address (worst run) | min start gap per host ms | max in flight |\n", below)
	fmt.Fprintln(bw, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		if r.scenario != "ip" {
			continue
		}
		gap := ""
		if r.addrMinGap >= 0 && !math.IsInf(r.addrMinGap, 0) {
			gap = fmt.Sprintf("%.1f", r.addrMinGap)
		}
		pol := r.politeness
		if pol == "" {
			pol = "host (default)"
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %.0f | %.0f | %.0f | %.2f | %.1f | %.0f | %.0f | %s | %.0f | %.1f | %.0f |\n",
			r.label, r.impl, pol, r.runsCell(), r.pages, r.errs, r.dups, r.wall, r.pps, r.addrs, r.addrStarts, gap, r.addrBelow, r.minGap, r.inflight)
	}
	fmt.Fprintln(bw)
}
