package main

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The scenarios of issue 20 (run.sh SCENARIOS=issue20): every crawler once
// on one site at 0 ms latency, and the long crawl whose peak RSS is compared.
const (
	issue20    = "issue20"
	issue20RSS = "issue20-rss"
)

// i20Row is one row of issue 20's table: what the issue measured before
// the work ("today"), the goal, and how this run's figure is computed from
// its rows; at returns the row of impl in a scenario, nil when it did not run.
type i20Row struct {
	name, today, goal string
	figure            func(at func(scenario, impl string) *row) string
}

var i20Rows = []i20Row{
	{
		name:  "`q.AddURL` from `OnHTML`, memory queue (`magpie-queue-add`): pages/s ÷ the same crawl through `e.Request.Visit` (`magpie-queue`); and ÷ the bare crawler (`raw`); and its CPU per page ÷ the Visit path's",
		today: "about 0.5× (0.18× of raw)",
		goal:  "≥ 0.95×",
		figure: func(at func(string, string) *row) string {
			add, visit, raw := at(issue20, "magpie-queue-add"), at(issue20, "magpie-queue"), at(issue20, "raw")
			if add == nil || visit == nil {
				return "–"
			}
			s := fmt.Sprintf("%s (%s ÷ %s pages/s)", times(add.pps, visit.pps), num(add.pps), num(visit.pps))
			if raw != nil {
				s += fmt.Sprintf("; %s of raw (%s)", times(add.pps, raw.pps), num(raw.pps))
			}
			// CPU per page moves less than pages/s when the machine is
			// shared: the steadier view of the same comparison.
			return s + fmt.Sprintf("; CPU s per page ÷ the Visit path's: %s", times(add.cpu/add.pages, visit.cpu/visit.pages))
		},
	},
	{
		name:  "the same on `sqlitestore` / `redisstore` (`magpie-queue-add-sqlite` / `-redis`): pages/s ÷ the memory queue's (`magpie-queue-add`); in brackets the Visit path's (`magpie-queue-sqlite` / `-redis` ÷ `magpie-queue`)",
		today: "0.11–0.15× (340 and 273 pages/s)",
		goal:  "≥ 0.7× / ≥ 0.6×",
		figure: func(at func(string, string) *row) string {
			mem := at(issue20, "magpie-queue-add")
			sq, rd := at(issue20, "magpie-queue-add-sqlite"), at(issue20, "magpie-queue-add-redis")
			if mem == nil || (sq == nil && rd == nil) {
				return "–"
			}
			s := fmt.Sprintf("%s / %s (%s / %s pages/s)", timesRow(sq, mem), timesRow(rd, mem), ppsRow(sq), ppsRow(rd))
			if v := at(issue20, "magpie-queue"); v != nil {
				vs, vr := at(issue20, "magpie-queue-sqlite"), at(issue20, "magpie-queue-redis")
				if vs != nil || vr != nil {
					s += fmt.Sprintf(" [Visit path: %s / %s]", timesRow(vs, v), timesRow(vr, v))
				}
			}
			return s
		},
	},
	{
		name:  "peak RSS of the long crawl (its table below), `q.AddURL` path (`magpie-queue-add`) ÷ the Visit path (`magpie-queue`); Colly's queue in MB as Colly programs write it (`colly-queue-add`), and with a `HasVisited` filter (`colly-queue`) when it ran",
		today: "1,849 MB (Visit path: 124 MB; Colly's queue: 1,380 MB)",
		goal:  "≤ 1.2×",
		figure: func(at func(string, string) *row) string {
			add, visit := at(issue20RSS, "magpie-queue-add"), at(issue20RSS, "magpie-queue")
			if add == nil || visit == nil {
				return "–"
			}
			s := fmt.Sprintf("%s (%s ÷ %s MB)", times(add.rss, visit.rss), num(add.rss), num(visit.rss))
			var colly []string
			for _, impl := range []string{"colly-queue-add", "colly-queue"} {
				if c := at(issue20RSS, impl); c != nil {
					colly = append(colly, fmt.Sprintf("`%s` %s MB", impl, num(c.rss)))
				}
			}
			if len(colly) > 0 {
				s += "; " + strings.Join(colly, ", ")
			}
			return s
		},
	},
	{
		name:  "async collector (`magpie-async`: `Async`, `Workers(P)`), 0 ms, P in flight: pages/s ÷ the bare crawler's; with `StreamHTML` (`magpie-async-stream`) after the semicolon (Colly's `colly-async` in brackets)",
		today: "0.38–0.45× (Colly: 0.13–0.21×)",
		goal:  "≥ 0.6×",
		figure: func(at func(string, string) *row) string {
			a, raw, c := at(issue20, "magpie-async"), at(issue20, "raw"), at(issue20, "colly-async")
			if a == nil || raw == nil {
				return "–"
			}
			s := fmt.Sprintf("%s (%s ÷ %s pages/s)", times(a.pps, raw.pps), num(a.pps), num(raw.pps))
			if st := at(issue20, "magpie-async-stream"); st != nil {
				s += fmt.Sprintf("; stream %s (%s pages/s)", times(st.pps, raw.pps), num(st.pps))
			}
			if c != nil {
				s += fmt.Sprintf(" (Colly: %s)", times(c.pps, raw.pps))
			}
			return s
		},
	},
	{
		name:  "CPU seconds per 20,000 pages ÷ the bare crawler's: `magpie-async` / `magpie-queue-add`; with `StreamHTML` (`-stream`) after the semicolon",
		today: "about 3× (magpie 4.6–5.0 s, bare 1.5–1.75 s)",
		goal:  "≤ 2×",
		figure: func(at func(string, string) *row) string {
			a, q, raw := at(issue20, "magpie-async"), at(issue20, "magpie-queue-add"), at(issue20, "raw")
			if raw == nil || (a == nil && q == nil) {
				return "–"
			}
			s := fmt.Sprintf("%s / %s (%s / %s s; raw %s s)",
				timesCPU(a, raw), timesCPU(q, raw), cpuRow(a), cpuRow(q), cpuRow(raw))
			as, qs := at(issue20, "magpie-async-stream"), at(issue20, "magpie-queue-add-stream")
			if as != nil || qs != nil {
				s += fmt.Sprintf("; stream %s / %s (%s / %s s)", timesCPU(as, raw), timesCPU(qs, raw), cpuRow(as), cpuRow(qs))
			}
			return s
		},
	},
	{
		name:  "heap allocations per page in the crawl process: `magpie-async` / `magpie-queue` / `magpie-queue-add`; with `StreamHTML` (`-stream`) after the semicolon (`raw`, `colly-async` in brackets)",
		today: "not measured",
		goal:  "fewer",
		figure: func(at func(string, string) *row) string {
			var ours, peers []string
			for _, impl := range []string{"magpie-async", "magpie-queue", "magpie-queue-add"} {
				ours = append(ours, allocsRow(at(issue20, impl)))
			}
			for _, impl := range []string{"raw", "colly-async"} {
				if r := at(issue20, impl); r != nil {
					peers = append(peers, impl+" "+allocsRow(r))
				}
			}
			s := strings.Join(ours, " / ")
			as, qs := at(issue20, "magpie-async-stream"), at(issue20, "magpie-queue-add-stream")
			if as != nil || qs != nil {
				s += "; stream " + allocsRow(as) + " / " + allocsRow(qs)
			}
			if len(peers) > 0 {
				s += " (" + strings.Join(peers, ", ") + ")"
			}
			return s
		},
	},
}

// writeIssue20 writes issue 20's table when the run has its scenarios:
// each row's figure for the older magpie (the IMPL@old rows of OLD_REF)
// beside today's, both from this run; raw and Colly rows serve both.
func writeIssue20(bw *bufio.Writer, rows []*row) {
	var labels []string
	hasOld := false
	for _, r := range rows {
		if r.scenario != issue20 && r.scenario != issue20RSS {
			continue
		}
		if !slices.Contains(labels, r.label) {
			labels = append(labels, r.label)
		}
		hasOld = hasOld || strings.HasSuffix(r.impl, "@old")
	}
	if len(labels) == 0 {
		return
	}
	find := func(suffix string) func(string, string) *row {
		return func(scenario, impl string) *row {
			if strings.HasPrefix(impl, "magpie-") {
				impl += suffix
			}
			for _, r := range rows {
				if r.scenario == scenario && r.impl == impl && r.pages > 0 {
					return r
				}
			}
			return nil
		}
	}
	fmt.Fprintf(bw, "### Issue 20: the rows of its table\n\n")
	fmt.Fprintf(bw, "Crawls: %s. Figures are medians of this run's crawls (tables below); old = the `IMPL@old` rows\n", strings.Join(labels, "; "))
	fmt.Fprintf(bw, "(an older magpie built with the same crawl code, `OLD_REF`), new = this tree; raw and Colly rows serve both.\n\n")
	fmt.Fprintln(bw, "| row of issue 20 | issue's \"today\" | old, this run | new, this run | goal |")
	fmt.Fprintln(bw, "|---|---|---|---|---|")
	for _, ir := range i20Rows {
		old := "not run (no `OLD_REF`)"
		if hasOld {
			old = ir.figure(find("@old"))
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %s |\n", ir.name, ir.today, old, ir.figure(find("")), ir.goal)
	}
	fmt.Fprintln(bw)
}

// times formats a ÷ b as a ratio.
func times(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// timesRow is times of two rows' pages/s, "–" when either did not run.
func timesRow(a, b *row) string {
	if a == nil || b == nil {
		return "–"
	}
	return times(a.pps, b.pps)
}

func ppsRow(r *row) string {
	if r == nil {
		return "–"
	}
	return num(r.pps)
}

// cpuPer20k is a row's CPU seconds scaled to 20,000 pages, the issue's unit.
func cpuPer20k(r *row) float64 { return r.cpu / r.pages * 20000 }

func timesCPU(a, raw *row) string {
	if a == nil {
		return "–"
	}
	return times(cpuPer20k(a), cpuPer20k(raw))
}

func cpuRow(r *row) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", cpuPer20k(r))
}

func allocsRow(r *row) string {
	if r == nil || r.allocs == 0 {
		return "–"
	}
	return num(r.allocs)
}

// num formats v rounded to a whole number with thousands separators.
func num(v float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v <= -0.5 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
