package main

import (
	"strings"
	"testing"
)

// TestReportBroadHeldAndOld: a sampled crawl's most entries leased and
// requests parked get a column (– leased for a crawl with no queue), and a
// crawler that ran beside its IMPL@old gets its ratios to it; a table with
// neither has neither column.
func TestReportBroadHeldAndOld(t *testing.T) {
	lines := []string{
		`{"scenario":"broad","label":"B","ideal_pps":1000,"run":1,"crawl":{"impl":"magpie-queue","pages":100,"pages_per_s":300,"cpu_s":2,"peak_rss_mb":50,"held":{"max_leased":70,"max_parked":12,"samples":9}},"site":{"total":{}}}`,
		`{"scenario":"broad","label":"B","ideal_pps":1000,"run":2,"crawl":{"impl":"magpie-queue","pages":100,"pages_per_s":300,"cpu_s":2,"peak_rss_mb":50,"held":{"max_leased":90,"max_parked":14,"samples":9}},"site":{"total":{}}}`,
		`{"scenario":"broad","label":"B","ideal_pps":1000,"run":1,"crawl":{"impl":"magpie-queue@old","pages":100,"pages_per_s":200,"cpu_s":4,"peak_rss_mb":100,"held":{"max_leased":4000,"max_parked":30,"samples":9}},"site":{"total":{}}}`,
		`{"scenario":"broad","label":"B","ideal_pps":1000,"run":1,"crawl":{"impl":"magpie-async","pages":100,"pages_per_s":310,"held":{"max_leased":-1,"max_parked":5,"samples":9}},"site":{"total":{}}}`,
		`{"scenario":"throughput","label":"T","run":1,"crawl":{"impl":"magpie-async","pages":100,"pages_per_s":310},"site":{"total":{}}}`,
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"| most leased / parked | ÷ @old pps / CPU / RSS |",
		"| 80 / 13 | 1.50 / 0.50 / 0.50 |", // medians of two runs; ÷ magpie-queue@old
		"| 4000 / 30 |  |",
		"| – / 5 |  |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q; got:\n%s", want, out)
		}
	}
	_, throughput, _ := strings.Cut(out, "### Throughput")
	if strings.Contains(throughput, "leased") || strings.Contains(throughput, "@old pps") {
		t.Errorf("throughput table has the held or @old columns, with no sampled or @old row:\n%s", throughput)
	}
}

// TestReportPriority: the priority table gives each crawl's share of the
// top N known pages fetched (median), the site's simulated shares, the
// share ÷ best-first and ÷ the same crawl of the old magpie.
func TestReportPriority(t *testing.T) {
	ideal := `"ideal_rank":{"n":500,"best_first":0.98,"best_first_known":3000,"fifo":0.2,"fifo_known":2900}`
	lines := []string{
		`{"scenario":"priority","label":"P order=rank","run":1,` + ideal + `,"crawl":{"impl":"magpie-queue","pages":501,"wall_s":2},"site":{"total":{},"rank":{"fetched":500,"known":3100,"top_fetched":450,"share":0.9}}}`,
		`{"scenario":"priority","label":"P order=none","run":1,` + ideal + `,"crawl":{"impl":"magpie-queue","pages":501,"wall_s":2},"site":{"total":{},"rank":{"fetched":500,"known":3000,"top_fetched":100,"share":0.2}}}`,
		`{"scenario":"priority","label":"P order=none","run":1,` + ideal + `,"crawl":{"impl":"magpie-queue@old","pages":501,"wall_s":2},"site":{"total":{},"rank":{"fetched":500,"known":3000,"top_fetched":125,"share":0.25}}}`,
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"### Priority",
		"| P order=rank | magpie-queue | 1 | 501 | 0 | 2.00 | 500 | 3100 | 0.900 | 0.98 / 0.20 | 0.92 |  |",
		"| P order=none | magpie-queue | 1 | 501 | 0 | 2.00 | 500 | 3000 | 0.200 | 0.98 / 0.20 | 0.20 | 0.80 |",
		"| P order=none | magpie-queue@old | 1 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("priority report lacks %q; got:\n%s", want, out)
		}
	}
}

// TestReportIP: the ip table gives the page starts at the addresses, the
// smallest gap at one and the gaps below the Delay of the worst run, and
// the politeness each crawl ran with.
func TestReportIP(t *testing.T) {
	lines := []string{
		`{"scenario":"ip","label":"I","politeness":"ip","run":1,"crawl":{"impl":"magpie-async","pages":200},"site":{"total":{"min_gap_ms":52},"addrs":[{"addr":"127.0.0.1","page_starts":200,"min_gap_ms":50.2,"gaps_below":0,"below_ms":50}]}}`,
		`{"scenario":"ip","label":"I","politeness":"ip","run":2,"crawl":{"impl":"magpie-async","pages":200},"site":{"total":{"min_gap_ms":51},"addrs":[{"addr":"127.0.0.1","page_starts":200,"min_gap_ms":49.9,"gaps_below":1,"below_ms":50}]}}`,
		`{"scenario":"ip","label":"I","run":1,"crawl":{"impl":"magpie-async@old","pages":200},"site":{"total":{"min_gap_ms":50.1},"addrs":[{"addr":"127.0.0.1","page_starts":200,"min_gap_ms":0.1,"gaps_below":150,"below_ms":50}]}}`,
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"| gaps < 50 ms at an address (worst run) |",
		"| I | magpie-async | ip | 2 | 200 | 0 | 0 | 0.00 | 0.0 | 1 | 200 | 49.9 | 1 | 51.5 | 0 |",
		"| I | magpie-async@old | host (default) | 1 | 200 | 0 | 0 | 0.00 | 0.0 | 1 | 200 | 0.1 | 150 | 50.1 | 0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ip report lacks %q; got:\n%s", want, out)
		}
	}
}
