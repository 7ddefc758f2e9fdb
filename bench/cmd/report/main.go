// Command report turns the JSON lines written by run.sh (one per crawl: the
// crawl command's result and the site's /_stats) into markdown tables of
// medians, one table per scenario, with magpie's ratios to Colly and raw.
//
// Usage: report < results.jsonl > tables.md
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// record is one line of run.sh output.
type record struct {
	Scenario string  `json:"scenario"` // throughput, politeness, rate, memory
	Label    string  `json:"label"`    // the scenario's parameters, e.g. "lat=0ms P=8"
	IdealPPS float64 `json:"ideal_pps"`
	// IdealLinks and IdealLinksFree (broad scenario) are the site's
	// simulated ideal crawl with links (site -ideal; see cmd/site/ideal.go),
	// robots.txt a turn of its host and free.
	IdealLinks     idealLinks `json:"ideal_links"`
	IdealLinksFree idealLinks `json:"ideal_links_free"`
	Run            int        `json:"run"`
	Crawl          crawl      `json:"crawl"`
	Site           site       `json:"site"`
	// IdealRank (priority scenario) is site -ideal-rank's output;
	// Politeness (ip scenario) the -politeness the crawl ran with.
	IdealRank  idealRank `json:"ideal_rank"`
	Politeness string    `json:"politeness"`
}

// idealLinks is the part of site -ideal's output the report uses.
type idealLinks struct {
	PagesPerS float64 `json:"pages_per_s"`
}

type crawl struct {
	Impl      string  `json:"impl"`
	Pages     float64 `json:"pages"`
	Errors    float64 `json:"errors"`
	WallS     float64 `json:"wall_s"`
	PagesPerS float64 `json:"pages_per_s"`
	CPUS      float64 `json:"cpu_s"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// AllocsPerPage is the crawl process's heap allocations ÷ pages.
	AllocsPerPage float64 `json:"allocs_per_page"`
	Frontier      float64 `json:"frontier"`
	Procs         int     `json:"procs"`
	Held          *held   `json:"held"`
	TimedOut      bool    `json:"timed_out"`
	Err           string  `json:"err"`
}

type hostStats struct {
	Requests    float64 `json:"requests"`
	Duplicates  float64 `json:"duplicates"`
	MaxInflight float64 `json:"max_inflight"`
	PageStarts  float64 `json:"page_starts"`
	MinGapMS    float64 `json:"min_gap_ms"`
	P05GapMS    float64 `json:"p05_gap_ms"`
	SpanS       float64 `json:"span_s"`
	NewConns    float64 `json:"new_conns"`
}

type site struct {
	Hosts []hostStats `json:"hosts"`
	Total hostStats   `json:"total"`
	Rank  *rankStats  `json:"rank"`
	Addrs []addrStats `json:"addrs"`
}

// row is the medians of every run of one implementation in one scenario.
type row struct {
	scenario, label, impl string
	procs                 int // worker processes; 0 when the crawl ran in one
	ideal                 float64
	idealLinks            float64 // the ideal with links, robots.txt a turn; 0 if not simulated
	idealLinksFree        float64 // the same, robots.txt free
	runs                  int
	failed                int
	pages, dups, errs     float64
	wall, pps, cpu, rss   float64
	allocs                float64 // heap allocations per page in the crawl process
	conns                 float64
	minGap                float64 // smallest start gap on any host, ms
	p05Gap                float64 // smallest 5th-percentile start gap of any host, ms
	hostInflight          float64 // most requests in flight on one host
	inflight              float64 // most requests in flight on the whole site
	siteRate              float64 // page starts per second seen by the site
	frontier              float64 // largest frontier the crawl saw (storage scenario)
	issue39
}

func main() {
	rows, err := load(os.Stdin)
	if err == nil {
		err = write(os.Stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func load(r io.Reader) ([]*row, error) {
	type key struct {
		scenario, label, impl string
		procs                 int
	}
	groups := map[key][]record{}
	var order []key
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		k := key{rec.Scenario, rec.Label, rec.Crawl.Impl, rec.Crawl.Procs}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], rec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return nil, errors.New("no records")
	}
	rows := make([]*row, 0, len(order))
	for _, k := range order {
		r := summarize(k.scenario, k.label, k.impl, groups[k])
		r.procs = k.procs
		rows = append(rows, r)
	}
	return rows, nil
}

func summarize(scenario, label, impl string, recs []record) *row {
	r := &row{scenario: scenario, label: label, impl: impl, ideal: recs[0].IdealPPS, runs: len(recs),
		idealLinks: recs[0].IdealLinks.PagesPerS, idealLinksFree: recs[0].IdealLinksFree.PagesPerS}
	med := func(f func(record) float64) float64 {
		v := make([]float64, len(recs))
		for i, rec := range recs {
			v[i] = f(rec)
		}
		return median(v)
	}
	for _, rec := range recs {
		if rec.Crawl.TimedOut || rec.Crawl.Err != "" {
			r.failed++
		}
	}
	r.pages = med(func(x record) float64 { return x.Crawl.Pages })
	r.errs = med(func(x record) float64 { return x.Crawl.Errors })
	r.dups = med(func(x record) float64 { return x.Site.Total.Duplicates })
	r.wall = med(func(x record) float64 { return x.Crawl.WallS })
	r.pps = med(func(x record) float64 { return x.Crawl.PagesPerS })
	r.cpu = med(func(x record) float64 { return x.Crawl.CPUS })
	r.rss = med(func(x record) float64 { return x.Crawl.PeakRSSMB })
	r.allocs = med(func(x record) float64 { return x.Crawl.AllocsPerPage })
	r.frontier = med(func(x record) float64 { return x.Crawl.Frontier })
	r.conns = med(func(x record) float64 { return x.Site.Total.NewConns })
	r.inflight = med(func(x record) float64 { return x.Site.Total.MaxInflight })
	r.minGap = med(func(x record) float64 { return x.Site.Total.MinGapMS })
	r.p05Gap = med(func(x record) float64 { return x.Site.Total.P05GapMS })
	r.hostInflight = med(func(x record) float64 {
		m := 0.0
		for _, h := range x.Site.Hosts {
			m = max(m, h.MaxInflight)
		}
		return m
	})
	summarize39(r, recs, med)
	r.siteRate = med(func(x record) float64 {
		// Every host is crawled over the same span, so the site's rate is
		// the sum of the hosts' own rates.
		sum := 0.0
		for _, h := range x.Site.Hosts {
			if h.SpanS > 0 {
				sum += (h.PageStarts - 1) / h.SpanS
			}
		}
		return sum
	})
	return r
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// peer returns the row magpie's row is compared with: the Colly program of the
// same shape, or raw.
func peer(rows []*row, r *row, impl string) *row {
	for _, o := range rows {
		if o.scenario == r.scenario && o.label == r.label && o.impl == impl {
			return o
		}
	}
	return nil
}

// collyPeer returns the Colly row a magpie row is compared with: the
// longest colly-NAME run in the same scenario whose NAME starts magpie's
// name, minus an "@old" (an older magpie, see OLD_REF in run.sh), at a "-":
// magpie-queue-add-sqlite compares with colly-queue-add when that ran, else
// colly-queue; magpie-async-ported and magpie-async@old with colly-async.
func collyPeer(rows []*row, r *row) *row {
	name, _ := strings.CutPrefix(r.impl, "magpie-")
	name, _, _ = strings.Cut(name, "@")
	for {
		if p := peer(rows, r, "colly-"+name); p != nil {
			return p
		}
		i := strings.LastIndex(name, "-")
		if i <= 0 {
			return nil
		}
		name = name[:i]
	}
}

// ratio formats a/b of pages/s, CPU s and RSS as "pps× cpu× rss×".
func ratio(a, b *row) string {
	if a == nil || b == nil {
		return ""
	}
	f := func(x, y float64) string {
		if y == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", x/y)
	}
	return f(a.pps, b.pps) + " / " + f(a.cpu, b.cpu) + " / " + f(a.rss, b.rss)
}

// share formats a/b to two places, "" when b is 0 (not measured).
func share(a, b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}

var titles = map[string]string{
	"throughput":  "Throughput",
	"politeness":  "Politeness (per-host Parallelism 1, Delay; ideal = hosts / Delay)",
	"rate":        "Rate accuracy (one host; ideal = 1 / Delay)",
	"memory":      "Memory",
	"storage":     "Frontier memory and Redis worker processes",
	"cluster":     "One Redis against a Redis Cluster",
	"issue20":     "Issue 20: every crawler at 0 ms",
	"issue20-rss": "Issue 20: peak RSS of a long crawl",
	"priority":    "Priority: a crawl stopped after N requests (site -rank: share of the N highest-ranked pages the crawl knew that it fetched)",
	"ip":          "Politeness by address (the site's hosts on the ports of one address: page starts at that address)",
	"broad":       "Broad crawl (a host per loopback address, robots.txt, per-host Parallelism 1, Delay; ideal = hosts / Delay; ideal (links) = the site's simulated crawl with no fetch time, pages fetched as links reveal them, robots.txt a turn of its host / free)",
}

func write(w io.Writer, rows []*row) error {
	var scenarios []string
	for _, r := range rows {
		if !slices.Contains(scenarios, r.scenario) {
			scenarios = append(scenarios, r.scenario)
		}
	}
	bw := bufio.NewWriter(w)
	writeIssue20(bw, rows)
	for _, sc := range scenarios {
		switch sc {
		case "storage", "cluster":
			writeStorage(bw, rows, sc)
			continue
		case "priority":
			writePriority(bw, rows)
			continue
		case "ip":
			writeIP(bw, rows)
			continue
		}
		polite := sc == "politeness" || sc == "rate" || sc == "broad"
		title := titles[sc]
		if title == "" {
			title = sc
		}
		fmt.Fprintf(bw, "### %s\n\n", title)
		head := "| scenario | impl | runs | pages | errors | dup fetches | wall s | pages/s | CPU s | peak RSS MB | allocs/page | new conns | max in flight |"
		sep := "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
		if polite {
			head += " ideal pages/s | site pages/s | min start gap ms | p5 start gap ms | max in flight/host |"
			sep += "--:|--:|--:|--:|--:|"
		}
		broad := sc == "broad"
		if broad {
			head += " pages/s ÷ hosts/Delay | ideal (links) pages/s turn / free | pages/s ÷ ideal (links) turn / free |"
			sep += "--:|--:|--:|"
		}
		held := anyHeld(rows, sc)
		if held {
			head += " most leased / parked |"
			sep += "--:|"
		}
		old := anyOld(rows, sc)
		if old {
			head += " ÷ @old pps / CPU / RSS |"
			sep += "---|"
		}
		head += " magpie/Colly pps / CPU / RSS | magpie/raw pps / CPU / RSS |"
		sep += "---|---|"
		fmt.Fprintln(bw, head)
		fmt.Fprintln(bw, sep)
		for _, r := range rows {
			if r.scenario != sc {
				continue
			}
			runs := fmt.Sprint(r.runs)
			if r.failed > 0 {
				runs += fmt.Sprintf(" (%d failed)", r.failed)
			}
			fmt.Fprintf(bw, "| %s | %s | %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f | %.1f | %.0f | %.0f | %.0f |",
				r.label, r.impl, runs, r.pages, r.errs, r.dups, r.wall, r.pps, r.cpu, r.rss, r.allocs, r.conns, r.inflight)
			if polite {
				fmt.Fprintf(bw, " %.0f | %.1f | %.1f | %.1f | %.0f |", r.ideal, r.siteRate, r.minGap, r.p05Gap, r.hostInflight)
			}
			if broad {
				var links, vsLinks string
				if r.idealLinks > 0 {
					links = fmt.Sprintf("%.0f / %.0f", r.idealLinks, r.idealLinksFree)
					vsLinks = share(r.pps, r.idealLinks) + " / " + share(r.pps, r.idealLinksFree)
				}
				fmt.Fprintf(bw, " %s | %s | %s |", share(r.pps, r.ideal), links, vsLinks)
			}
			if held {
				fmt.Fprintf(bw, " %s |", r.heldCell())
			}
			if old {
				fmt.Fprintf(bw, " %s |", ratio(r, oldPeer(rows, r)))
			}
			var vsColly, vsRaw string
			if _, ok := strings.CutPrefix(r.impl, "magpie-"); ok {
				vsColly = ratio(r, collyPeer(rows, r))
				vsRaw = ratio(r, peer(rows, r, "raw"))
			}
			fmt.Fprintf(bw, " %s | %s |\n", vsColly, vsRaw)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// writeStorage writes the storage scenario's table (and the cluster
// scenario's, sc): frontier size and peak RSS of the frontier crawls, and
// the multi-process crawl's pages/s against the same crawl with one process
// (and, for the cluster, against the same row on one node).
func writeStorage(bw *bufio.Writer, rows []*row, sc string) {
	fmt.Fprintf(bw, "### %s\n\n", titles[sc])
	head := "| scenario | impl | procs | runs | pages | errors | dup fetches | frontier reached | wall s | pages/s | CPU s | peak RSS MB | allocs/page | pages/s ÷ 1 proc |"
	sep := "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	if sc == "cluster" {
		head += " pages/s cluster ÷ node |"
		sep += "--:|"
	}
	fmt.Fprintln(bw, head)
	fmt.Fprintln(bw, sep)
	for _, r := range rows {
		if r.scenario != sc {
			continue
		}
		runs := fmt.Sprint(r.runs)
		if r.failed > 0 {
			runs += fmt.Sprintf(" (%d failed)", r.failed)
		}
		procs, frontier, vsOne := "1", "", ""
		if r.procs > 0 {
			procs = fmt.Sprint(r.procs)
			for _, o := range rows {
				if o.scenario == r.scenario && o.label == r.label && o.impl == r.impl && o.procs == 1 && o.pps > 0 {
					vsOne = fmt.Sprintf("%.2f", r.pps/o.pps)
				}
			}
		}
		if r.frontier > 0 {
			frontier = fmt.Sprintf("%.0f", r.frontier)
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %.0f | %.0f | %.0f | %s | %.2f | %.0f | %.2f | %.1f | %.0f | %s |",
			r.label, r.impl, procs, runs, r.pages, r.errs, r.dups, frontier, r.wall, r.pps, r.cpu, r.rss, r.allocs, vsOne)
		if sc == "cluster" {
			vsNode := ""
			if node, ok := strings.CutPrefix(r.label, "cluster: "); ok {
				for _, o := range rows {
					if o.scenario == sc && o.label == "node: "+node && o.impl == r.impl && o.procs == r.procs && o.pps > 0 {
						vsNode = fmt.Sprintf("%.2f", r.pps/o.pps)
					}
				}
			}
			fmt.Fprintf(bw, " %s |", vsNode)
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintln(bw)
}
