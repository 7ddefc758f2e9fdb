package main

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Rank mode (-rank) measures what a crawl stopped after N pages holds:
// every page has a rank (generator.rank) that each link to it carries, and
// a crawler that ranks links by it (magpie's Prioritize) should fetch the
// highest-ranked pages it knows of before the others.
//
// The measure, rankShare: the crawl fetched the set F of pages (the seed
// left out, as every crawl fetches it first) and knew of the set K, the
// pages the pages of F link to (a crawler parses every page it fetched;
// one whose fetch a stopping crawl cut short counts too, so K may hold a
// few pages more than the crawler saw). Of the |F| highest-ranked pages of
// K, the share that is in F is what the crawl got right: 1 for a crawl
// whose every fetch beat every page it left, about |F| ÷ |K| for a crawl
// blind to rank. Ties at the threshold count for the crawl.
//
// No crawl that discovers pages as it goes reaches 1: a page fetched early
// may be outranked by pages found later. -ideal-rank N prints the share of
// the best a crawler can do one page at a time (always the highest-ranked
// known page next) beside that of a crawler blind to rank (known pages in
// the order links revealed them), on the same links.

// RankReport is the rank figures of /_stats in rank mode.
type RankReport struct {
	// Fetched counts the pages fetched, the seed left out: N.
	Fetched int `json:"fetched"`
	// Known counts the pages the fetched pages link to, the seed left out.
	Known int `json:"known"`
	// TopFetched counts the pages of the Fetched highest-ranked known
	// pages that were fetched; Share is TopFetched ÷ Fetched (0 when
	// nothing was fetched).
	TopFetched int     `json:"top_fetched"`
	Share      float64 `json:"share"`
}

// seedPage is the page every crawl starts from.
var seedPage = target{0, 0}

// rankShare computes the RankReport of a crawl that fetched the pages of
// fetched (duplicates and the seed allowed) on r's site.
func rankShare(r *linkResolver, fetched []target) RankReport {
	got := make(map[target]bool, len(fetched))
	known := make(map[target]bool, 4*len(fetched))
	for _, p := range fetched {
		got[p] = true
		known[p] = true
		for _, t := range r.pageTargets(p.h, p.i) {
			known[t] = true
		}
	}
	delete(got, seedPage)
	delete(known, seedPage)
	return shareOf(r.g, got, known)
}

// shareOf is rankShare's count: of the len(got) highest-ranked pages of
// known (a superset of got), how many are in got.
func shareOf(g *generator, got, known map[target]bool) RankReport {
	rep := RankReport{Fetched: len(got), Known: len(known)}
	if len(got) == 0 {
		return rep
	}
	ranks := make([]int, 0, len(known))
	for p := range known {
		ranks = append(ranks, g.rank(p.h, p.i))
	}
	slices.Sort(ranks)
	slices.Reverse(ranks)
	threshold := ranks[len(got)-1] // the N-th highest rank known
	above := 0                     // known pages ranked above the threshold, all in the top N
	for _, k := range ranks {
		if k <= threshold {
			break
		}
		above++
	}
	var gotAbove, gotAt int
	for p := range got {
		switch k := g.rank(p.h, p.i); {
		case k > threshold:
			gotAbove++
		case k == threshold:
			gotAt++
		}
	}
	// The top N holds every page above the threshold and N-above of those
	// at it: a fetched page at the threshold counts while places are left.
	rep.TopFetched = gotAbove + min(gotAt, len(got)-above)
	rep.Share = float64(rep.TopFetched) / float64(rep.Fetched)
	return rep
}

// idealRankResult is what -ideal-rank prints, as one line of JSON.
type idealRankResult struct {
	N int `json:"n"` // pages fetched besides the seed
	// BestFirst is the share of a crawl that always fetches the
	// highest-ranked known page next (ties: the one found first); Known
	// is how many pages it knew at the end.
	BestFirst      float64 `json:"best_first"`
	BestFirstKnown int     `json:"best_first_known"`
	// FIFO is the share of a crawl that fetches known pages in the order
	// links revealed them (rank ignored), FIFOKnown what it knew.
	FIFO      float64 `json:"fifo"`
	FIFOKnown int     `json:"fifo_known"`
}

// rankQueue is the known, unfetched pages of a simulated crawl, by rank
// (highest first) or in the order found.
type rankQueue struct {
	g      *generator
	byRank bool
	items  []rankItem
}

type rankItem struct {
	p    target
	rank int
	seq  int // order found
}

func (q *rankQueue) Len() int { return len(q.items) }
func (q *rankQueue) Less(a, b int) bool {
	x, y := q.items[a], q.items[b]
	if q.byRank && x.rank != y.rank {
		return x.rank > y.rank
	}
	return x.seq < y.seq
}
func (q *rankQueue) Swap(a, b int) { q.items[a], q.items[b] = q.items[b], q.items[a] }
func (q *rankQueue) Push(x any)    { q.items = append(q.items, x.(rankItem)) }
func (q *rankQueue) Pop() any {
	e := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return e
}

// simulateRank plays a crawl of r's site from the seed that fetches n pages
// besides it, one at a time, the highest-ranked known page first (byRank) or
// in the order links revealed them, and returns its share (rankShare).
// Pages that answer 500 (-error-rate) are fetched and yield no links.
func simulateRank(r *linkResolver, n int, byRank bool) RankReport {
	q := &rankQueue{g: r.g, byRank: byRank}
	seen := map[target]bool{seedPage: true}
	var fetched []target
	seq := 0
	fetch := func(p target) {
		fetched = append(fetched, p)
		if r.g.fails(p.h, p.i) {
			return
		}
		for _, t := range r.pageTargets(p.h, p.i) {
			if !seen[t] {
				seen[t] = true
				heap.Push(q, rankItem{p: t, rank: r.g.rank(t.h, t.i), seq: seq})
				seq++
			}
		}
	}
	fetch(seedPage)
	for len(fetched) <= n && q.Len() > 0 {
		fetch(heap.Pop(q).(rankItem).p)
	}
	return rankShare(r, fetched)
}

// runIdealRank implements -ideal-rank: both simulated crawls of cfg's site
// to n pages, as one line of JSON on w.
func runIdealRank(w io.Writer, cfg config, n int) error {
	switch {
	case !cfg.rank:
		return errors.New("-ideal-rank needs -rank")
	case n < 1:
		return errors.New("-ideal-rank must be at least 1")
	}
	r := newLinkResolver(newGenerator(cfg, simBases(cfg.hosts)))
	best, fifo := simulateRank(r, n, true), simulateRank(r, n, false)
	out, err := json.Marshal(idealRankResult{
		N: best.Fetched, BestFirst: best.Share, BestFirstKnown: best.Known, FIFO: fifo.Share, FIFOKnown: fifo.Known,
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
