#!/usr/bin/env bash
# issue41.sh — issue 41: the cost of the live page. crawl-magpie's
# magpie-async and magpie-async-ui (the same crawl with package dashboard
# mounted and one client reading /api/events for the whole crawl),
# alternating, $RUNS rounds (default 5), on the synthetic site of $PAGES
# pages (default 20,000; 16 KB, 10 links, latency $LATENCY, default 0ms) at
# $P workers (default 64). Prints a markdown table of medians: pages/s,
# CPU s, peak RSS, and the ratio ui ÷ plain. Run by hand, not by run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
trap 'kill $site_pid 2>/dev/null || true; rm -rf "$bin"' EXIT
(cd "$here" && GOWORK=off go build -o "$bin/" ./cmd/site)
(cd "$here/magpie" && GOWORK=off go build -o "$bin/crawl-magpie" .)
RUNS=${RUNS:-5} PAGES=${PAGES:-20000} P=${P:-64} LATENCY=${LATENCY:-0ms}
"$bin/site" -pages "$PAGES" -size 16384 -links 10 -latency "$LATENCY" >"$bin/site.out" &
site_pid=$!
for _ in $(seq 100); do [[ -s $bin/site.out ]] && break; sleep 0.05; done
base=$(head -n1 "$bin/site.out" | cut -d' ' -f1)
: >"$bin/runs.jsonl"
for run in $(seq "$RUNS"); do
	for impl in magpie-async magpie-async-ui; do
		curl -fsS "$base/_reset" >/dev/null
		"$bin/crawl-magpie" -impl "$impl" -p "$P" -url "$base/" >>"$bin/runs.jsonl"
		echo "run $run $impl: $(tail -n1 "$bin/runs.jsonl")" >&2
	done
done
python3 - "$bin/runs.jsonl" "$PAGES" "$P" "$LATENCY" "$RUNS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = lambda impl, k: statistics.median(r[k] for r in rows if r["impl"] == impl)
print(f"{sys.argv[2]} pages, P={sys.argv[3]}, latency {sys.argv[4]}, {sys.argv[5]} runs each, alternating; medians\n")
print("| crawler | pages | pages/s | CPU s | peak RSS MB |")
print("| --- | ---: | ---: | ---: | ---: |")
for impl in ("magpie-async", "magpie-async-ui"):
    print(f"| {impl} | {med(impl, 'pages'):.0f} | {med(impl, 'pages_per_s'):.0f} | {med(impl, 'cpu_s'):.2f} | {med(impl, 'peak_rss_mb'):.0f} |")
r = med("magpie-async-ui", "pages_per_s") / med("magpie-async", "pages_per_s")
print(f"\npages/s with the page open ÷ without: {r:.3f}")
PY
