package main

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestReport(t *testing.T) {
	lines := []string{
		`{"scenario":"throughput","label":"L","run":1,"crawl":{"impl":"colly-async","pages":100,"pages_per_s":100,"cpu_s":2,"peak_rss_mb":40},"site":{"total":{"duplicates":2,"new_conns":9}}}`,
		`{"scenario":"throughput","label":"L","run":1,"crawl":{"impl":"magpie-async","pages":100,"pages_per_s":150,"cpu_s":1,"peak_rss_mb":20,"allocs_per_page":800},"site":{"total":{}}}`,
		`{"scenario":"throughput","label":"L","run":2,"crawl":{"impl":"magpie-async","pages":100,"pages_per_s":250,"cpu_s":1,"peak_rss_mb":20,"allocs_per_page":900},"site":{"total":{}}}`,
		`{"scenario":"throughput","label":"L","run":3,"crawl":{"impl":"magpie-async","pages":100,"pages_per_s":200,"cpu_s":1,"peak_rss_mb":20,"allocs_per_page":1000,"timed_out":true},"site":{"total":{}}}`,
		`{"scenario":"throughput","label":"L","run":1,"crawl":{"impl":"raw","pages":100,"pages_per_s":400,"cpu_s":0.5,"peak_rss_mb":10},"site":{"total":{}}}`,
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"| L | magpie-async | 3 (1 failed) | 100 | 0 | 0 | 0.00 | 200 | 1.00 | 20.0 | 900 |", // median pages/s of 150, 250, 200; allocs/page
		"| 2.00 / 0.50 / 0.50 | 0.50 / 2.00 / 2.00 |",                                        // ratios to colly-async and raw
		"| L | colly-async | 1 | 100 | 0 | 2 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q; got:\n%s", want, out)
		}
	}
	if _, err := load(strings.NewReader("not json\n")); err == nil {
		t.Errorf("load(garbage) error = nil, want an error")
	}
	if _, err := load(strings.NewReader("")); err == nil {
		t.Errorf("load(empty) error = nil, want an error")
	}
}

func TestReportStorage(t *testing.T) {
	lines := []string{
		`{"scenario":"storage","label":"hubs","run":1,"crawl":{"impl":"magpie-frontier-sqlite","pages":300,"frontier":1000123,"peak_rss_mb":80},"site":{"total":{}}}`,
		`{"scenario":"storage","label":"lat","run":1,"crawl":{"impl":"magpie-redis","procs":1,"pages":5000,"pages_per_s":100},"site":{"total":{}}}`,
		`{"scenario":"storage","label":"lat","run":1,"crawl":{"impl":"magpie-redis","procs":3,"pages":5000,"pages_per_s":280},"site":{"total":{"duplicates":1}}}`,
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"### Frontier memory and Redis worker processes",
		"| hubs | magpie-frontier-sqlite | 1 | 1 | 300 | 0 | 0 | 1000123 |",
		"| lat | magpie-redis | 1 | 1 | 5000 | 0 | 0 |  | 0.00 | 100 | 0.00 | 0.0 | 0 | 1.00 |",
		"| lat | magpie-redis | 3 | 1 | 5000 | 0 | 1 |  | 0.00 | 280 | 0.00 | 0.0 | 0 | 2.80 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("storage report lacks %q; got:\n%s", want, out)
		}
	}
}

// TestReportBroadIdeals: the broad table shows each crawler's pages/s
// against hosts ÷ Delay and against the site's simulated ideal with links,
// robots.txt a turn and free, and leaves the latter empty for a record
// from before the simulation.
func TestReportBroadIdeals(t *testing.T) {
	lines := []string{
		`{"scenario":"broad","label":"B","ideal_pps":1000,"ideal_links":{"pages_per_s":454.5},"ideal_links_free":{"pages_per_s":666.7},"run":1,"crawl":{"impl":"raw","pages":20000,"pages_per_s":471},"site":{"total":{}}}`,
		`{"scenario":"broad","label":"B","ideal_pps":1000,"ideal_links":{"pages_per_s":454.5},"ideal_links_free":{"pages_per_s":666.7},"run":1,"crawl":{"impl":"magpie-async","pages":20000,"pages_per_s":433},"site":{"total":{}}}`,
		`{"scenario":"broad","label":"Old","ideal_pps":1000,"run":1,"crawl":{"impl":"raw","pages":20000,"pages_per_s":500},"site":{"total":{}}}`,
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"| pages/s ÷ hosts/Delay | ideal (links) pages/s turn / free | pages/s ÷ ideal (links) turn / free |",
		"| B | raw | 1 | 20000 |",
		"| 0.47 | 454 / 667 | 1.04 / 0.71 |",
		"| 0.43 | 454 / 667 | 0.95 / 0.65 |",
		"| 0.50 |  |  |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("broad report lacks %q; got:\n%s", want, out)
		}
	}
}

// reportOf is the report of the JSON lines given.
func reportOf(t *testing.T, lines []string) string {
	t.Helper()
	rows, err := load(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var b strings.Builder
	if err := write(&b, rows); err != nil {
		t.Fatalf("write: %v", err)
	}
	return b.String()
}
