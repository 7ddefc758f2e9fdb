#!/usr/bin/env bash
# issue41.sh — issue 41: the cost of the live page. crawl-magpie's
# magpie-async and magpie-async-ui (the same crawl with package dashboard
# mounted and one client reading /api/events for the whole crawl, a
# snapshot a second), alternating, $RUNS rounds (default 5), on two sites:
#
#   one host:   $PAGES pages (default 100,000; 16 KB, 10 links, latency
#               $LATENCY, default 0ms) at $P workers (default 64);
#   many hosts: $HOSTS hosts (default 500) on loopback addresses of one
#               port, $HOST_PAGES pages each (default 200), robots.txt,
#               Parallelism 1 per host and no Delay, at $P workers: the
#               page's hosts table then has $HOSTS rows to sort each second.
#
# Prints a markdown table of medians per site: pages/s, CPU s, peak RSS,
# and the ratio ui ÷ plain. Run by hand, not by run.sh; run it on an
# otherwise idle machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
site_pid=""
trap 'kill $site_pid 2>/dev/null || true; rm -rf "$bin"' EXIT
(cd "$here" && GOWORK=off go build -o "$bin/" ./cmd/site)
(cd "$here/magpie" && GOWORK=off go build -o "$bin/crawl-magpie" .)
RUNS=${RUNS:-5} PAGES=${PAGES:-100000} P=${P:-64} LATENCY=${LATENCY:-0ms}
HOSTS=${HOSTS:-500} HOST_PAGES=${HOST_PAGES:-200}

# start_site FLAGS... — starts the site; sets bases (every host's base URL,
# space-separated) and base (the first).
start_site() {
	[[ -n $site_pid ]] && { kill "$site_pid" 2>/dev/null || true; wait "$site_pid" 2>/dev/null || true; }
	: >"$bin/site.out"
	"$bin/site" "$@" >"$bin/site.out" &
	site_pid=$!
	for _ in $(seq 100); do [[ -s $bin/site.out ]] && break; sleep 0.05; done
	bases=$(head -n1 "$bin/site.out")
	[[ -n $bases ]] || { echo "site did not start" >&2; exit 1; }
	base=${bases%% *}
}

# rounds LABEL CRAWL-FLAGS... — $RUNS alternating rounds of both crawlers.
rounds() {
	local label=$1
	shift
	for run in $(seq "$RUNS"); do
		for impl in magpie-async magpie-async-ui; do
			curl -fsS "$base/_reset" >/dev/null
			"$bin/crawl-magpie" -impl "$impl" -p "$P" "$@" |
				python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r["site"]=sys.argv[1]; print(json.dumps(r))' "$label" >>"$bin/runs.jsonl"
			echo "$label, run $run, $impl: $(tail -n1 "$bin/runs.jsonl")" >&2
		done
	done
}

: >"$bin/runs.jsonl"
start_site -pages "$PAGES" -size 16 -links 10 -latency "$LATENCY"
rounds "one host, $PAGES pages, latency $LATENCY" -url "$base/"
start_site -hosts "$HOSTS" -loopback -one-listener -robots -pages "$HOST_PAGES" -size 16 -links 10
printf '%s\n' $bases | tr '\n' ',' >"$bin/hosts"
rounds "$HOSTS hosts × $HOST_PAGES pages, robots.txt, 1 per host" -url "$base/" -host-par 1 -robots -hosts "@$bin/hosts"

python3 - "$bin/runs.jsonl" "$P" "$RUNS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"P={sys.argv[2]}, {sys.argv[3]} runs of each crawler per site, alternating; medians\n")
print("| site | crawler | pages | pages/s | CPU s | peak RSS MB | pages/s ui ÷ plain |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for site in dict.fromkeys(r["site"] for r in rows):
    med = lambda impl, k: statistics.median(r[k] for r in rows if r["impl"] == impl and r["site"] == site)
    ratio = med("magpie-async-ui", "pages_per_s") / med("magpie-async", "pages_per_s")
    for impl in ("magpie-async", "magpie-async-ui"):
        cell = f"**{ratio:.3f}**" if impl == "magpie-async-ui" else ""
        print(f"| {site} | {impl} | {med(impl, 'pages'):.0f} | {med(impl, 'pages_per_s'):.0f} | {med(impl, 'cpu_s'):.2f} | {med(impl, 'peak_rss_mb'):.0f} | {cell} |")
PY
