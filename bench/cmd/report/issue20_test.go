package main

import (
	"fmt"
	"strings"
	"testing"
)

// i20Line is one JSON line of the issue 20 scenarios.
func i20Line(scenario, impl string, pages, pps, cpu, rss, allocs float64) string {
	return fmt.Sprintf(`{"scenario":%q,"label":"L-%s","run":1,"crawl":{"impl":%q,"pages":%g,"pages_per_s":%g,"cpu_s":%g,"peak_rss_mb":%g,"allocs_per_page":%g},"site":{"total":{}}}`,
		scenario, scenario, impl, pages, pps, cpu, rss, allocs)
}

func TestReportIssue20(t *testing.T) {
	lines := []string{
		i20Line("issue20", "raw", 20000, 10000, 1.5, 30, 100),
		i20Line("issue20", "colly-async", 20000, 2000, 6, 90, 3000),
		i20Line("issue20", "magpie-async", 20000, 4000, 4.5, 80, 1500),
		i20Line("issue20", "magpie-queue", 10000, 5000, 2.5, 70, 1200),
		i20Line("issue20", "magpie-async-stream", 20000, 6000, 3, 70, 900),
		i20Line("issue20", "magpie-queue-add-stream", 20000, 3000, 4.5, 70, 1600),
		i20Line("issue20", "magpie-queue-add", 20000, 2500, 6, 70, 2000),
		i20Line("issue20", "magpie-queue-add-sqlite", 20000, 500, 8, 70, 2500),
		i20Line("issue20", "magpie-queue-add-redis", 20000, 250, 8, 70, 2600),
		i20Line("issue20", "magpie-queue-sqlite", 20000, 3500, 8, 70, 2500),
		i20Line("issue20", "magpie-queue-add@old", 20000, 2000, 6, 70, 2000),
		i20Line("issue20", "magpie-queue@old", 20000, 5000, 6, 70, 2000),
		i20Line("issue20-rss", "magpie-queue", 200000, 5000, 40, 124, 1000),
		i20Line("issue20-rss", "magpie-queue-add", 200000, 2500, 60, 1849, 2000),
		i20Line("issue20-rss", "colly-queue-add", 200000, 1000, 80, 1380, 4000),
	}
	out := reportOf(t, lines)
	for _, want := range []string{
		"### Issue 20: the rows of its table",
		"Crawls: L-issue20; L-issue20-rss.",
		// Row 1, old and new: AddURL ÷ Visit, and ÷ raw.
		// The Visit path's CPU per page: @old 6 s ÷ 20,000, new 2.5 s ÷ 10,000.
		"| 0.40× (2,000 ÷ 5,000 pages/s); 0.20× of raw (10,000); CPU s per page ÷ the Visit path's: 1.00× | 0.50× (2,500 ÷ 5,000 pages/s); 0.25× of raw (10,000); CPU s per page ÷ the Visit path's: 1.20× | ≥ 0.95× |",
		// Row 2: no @old store rows; the Visit path on SQLite only.
		"| – | 0.20× / 0.10× (500 / 250 pages/s) [Visit path: 0.70× / –] |",
		// Row 3: no @old rows in the long crawl.
		"| – | 14.91× (1,849 ÷ 124 MB); `colly-queue-add` 1,380 MB |",
		// Row 4: async ÷ raw, with StreamHTML, Colly in brackets; no magpie-async@old.
		"| – | 0.40× (4,000 ÷ 10,000 pages/s); stream 0.60× (6,000 pages/s) (Colly: 0.20×) |",
		// Row 5: CPU per 20,000 pages: magpie-queue ran 10,000 pages here but is not in it.
		"| 3.00× / 4.00× (4.50 / 6.00 s; raw 1.50 s); stream 2.00× / 3.00× (3.00 / 4.50 s) |",
		"| 1,500 / 1,200 / 2,000; stream 900 / 1,600 (raw 100, colly-async 3,000) |",
		// The detail tables: allocs/page, and magpie-queue-add's Colly peer is colly-queue-add.
		"| L-issue20-rss | magpie-queue-add | 1 | 200000 | 0 | 0 | 0.00 | 2500 | 60.00 | 1849.0 | 2000 | 0 | 0 | 2.50 / 0.75 / 1.34 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("issue 20 report lacks %q; got:\n%s", want, out)
		}
	}
}

func TestReportIssue20NoOld(t *testing.T) {
	rows, err := load(strings.NewReader(i20Line("issue20", "raw", 20000, 10000, 1.5, 30, 100)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var b strings.Builder
	if err := write(&b, rows); err != nil {
		t.Fatalf("write: %v", err)
	}
	if out := b.String(); !strings.Contains(out, "| not run (no `OLD_REF`) | – | ≥ 0.95× |") {
		t.Errorf("report without @old rows lacks the 'not run' old column; got:\n%s", out)
	}
}

func TestCollyPeer(t *testing.T) {
	rows := []*row{
		{scenario: "s", label: "l", impl: "colly-async"},
		{scenario: "s", label: "l", impl: "colly-queue"},
		{scenario: "s", label: "l", impl: "colly-queue-add"},
		{scenario: "other", label: "l", impl: "colly-queue-sqlite"},
	}
	tests := []struct{ impl, want string }{
		{"magpie-async", "colly-async"},
		{"magpie-async-ported", "colly-async"},
		{"magpie-async@old", "colly-async"},
		{"magpie-queue", "colly-queue"},
		{"magpie-queue-sqlite", "colly-queue"},
		{"magpie-queue-add", "colly-queue-add"},
		{"magpie-queue-add-redis@old", "colly-queue-add"},
		{"magpie-frontier-mem", ""},
	}
	for _, tt := range tests {
		t.Run(tt.impl, func(t *testing.T) {
			got := ""
			if p := collyPeer(rows, &row{scenario: "s", label: "l", impl: tt.impl}); p != nil {
				got = p.impl
			}
			if got != tt.want {
				t.Errorf("collyPeer(%s) = %q, want %q", tt.impl, got, tt.want)
			}
		})
	}
}
