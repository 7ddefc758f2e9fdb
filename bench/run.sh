#!/usr/bin/env bash
# run.sh — magpie against Colly and a bare net/http crawler.
#
# Builds bench/cmd/{site,crawl,report}, runs the scenarios below against the
# synthetic site, and writes medians as markdown tables to RESULTS.md (or
# $OUT). Raw per-crawl JSON lines go to $JSONL.
#
#   QUICK=1        small sizes, 1 run each (a smoke test of the harness)
#   RUNS=N         runs per (scenario, impl); default 3 (QUICK: 1); medians are reported
#   MEM_RUNS=N     runs of the memory scenario; default 1 (it is the longest)
#   SCENARIOS="throughput politeness rate memory"   subset to run
#   IMPLS="raw colly-async ..."   default: every impl of both crawl binaries
#   MAGPIE=0       do not build the bench/magpie module (magpie-* impls); default 1
#   NOTE="..."     a line added under the machine description in the results
#   OUT=path JSONL=path
#
# A full run is sized for about 20 minutes on 2 idle cores (QUICK timings on a
# loaded shared machine extrapolate to 25-40 min there); the one exception to
# the brief's sizes is throughput at latency 5 ms with P=1, which is crawled
# with P1_LAT_PAGES pages (default 2000) because 20,000 sequential 5 ms
# fetches take 100 s per run and implementation.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	RUNS=${RUNS:-1}
	TP_PAGES=${TP_PAGES:-1000}
	P1_LAT_PAGES=${P1_LAT_PAGES:-200}
	POL_HOSTS=${POL_HOSTS:-5}
	POL_PAGES=${POL_PAGES:-20}
	RATE_PAGES=${RATE_PAGES:-30}
	MEM_PAGES=${MEM_PAGES:-10000}
else
	RUNS=${RUNS:-3}
	TP_PAGES=${TP_PAGES:-20000}
	P1_LAT_PAGES=${P1_LAT_PAGES:-2000}
	POL_HOSTS=${POL_HOSTS:-20}
	POL_PAGES=${POL_PAGES:-100}
	RATE_PAGES=${RATE_PAGES:-200}
	MEM_PAGES=${MEM_PAGES:-200000}
fi
MEM_RUNS=${MEM_RUNS:-1}
SCENARIOS=${SCENARIOS:-"throughput politeness rate memory"}
MAGPIE=${MAGPIE:-1}
OUT=${OUT:-$here/RESULTS.md}
JSONL=${JSONL:-$here/results.jsonl}
NOTE=${NOTE:-}
CRAWL_TIMEOUT=${CRAWL_TIMEOUT:-15m}

bin=$(mktemp -d)
site_pid=""
cleanup() {
	if [[ -n $site_pid ]]; then
		kill "$site_pid" 2>/dev/null || true
		wait "$site_pid" 2>/dev/null || true
	fi
	rm -rf "$bin"
}
trap cleanup EXIT

echo "building into $bin" >&2
go build -o "$bin/" ./cmd/site ./cmd/report ./cmd/crawl
# magpie and Colly need incompatible gobwas/glob versions, so the magpie
# crawlers are a second binary built from their own module.
all_impls=$("$bin/crawl" -list)
if [[ $MAGPIE == 1 ]]; then
	(cd magpie && go build -o "$bin/crawl-magpie" .)
	all_impls="$all_impls $("$bin/crawl-magpie" -list | tr ' ' '\n' | grep '^magpie-' | tr '\n' ' ')"
fi
IMPLS=${IMPLS:-$all_impls}
: >"$JSONL"

# start_site FLAGS... — starts the site and sets $bases (space separated) and $base (the first).
start_site() {
	stop_site
	local out="$bin/site.out"
	: >"$out"
	"$bin/site" "$@" >"$out" &
	site_pid=$!
	for _ in $(seq 100); do
		[[ -s $out ]] && break
		sleep 0.05
	done
	bases=$(head -n1 "$out")
	[[ -n $bases ]] || { echo "site did not start" >&2; exit 1; }
	base=${bases%% *}
}

stop_site() {
	if [[ -n $site_pid ]]; then
		kill "$site_pid" 2>/dev/null || true
		wait "$site_pid" 2>/dev/null || true
		site_pid=""
	fi
}

# crawl SCENARIO LABEL IDEAL RUN IMPL CRAWL-FLAGS... — one crawl, one JSON line.
crawl() {
	local scenario=$1 label=$2 ideal=$3 run=$4 impl=$5
	shift 5
	curl -fsS "$base/_reset" >/dev/null
	local res
	local cmd=$bin/crawl
	[[ $impl == magpie-* ]] && cmd=$bin/crawl-magpie
	res=$(timeout "$CRAWL_TIMEOUT" "$cmd" -impl "$impl" -url "$base/" "$@" || true)
	[[ -n $res ]] || res="{\"impl\":\"$impl\",\"err\":\"crawl produced no result\"}"
	local stats
	stats=$(curl -fsS "$base/_stats")
	printf '{"scenario":"%s","label":"%s","ideal_pps":%s,"run":%d,"crawl":%s,"site":%s}\n' \
		"$scenario" "$label" "$ideal" "$run" "$res" "$stats" >>"$JSONL"
	echo "  $scenario [$label] run $run: $res" >&2
}

# runs N SCENARIO LABEL IDEAL CRAWL-FLAGS... — N rounds of every impl, interleaved
# so that a burst of load on the machine does not land on one impl only.
runs() {
	local n=$1 scenario=$2 label=$3 ideal=$4
	shift 4
	for run in $(seq "$n"); do
		for impl in $IMPLS; do
			crawl "$scenario" "$label" "$ideal" "$run" "$impl" "$@"
		done
	done
}

for sc in $SCENARIOS; do
	case $sc in
	throughput)
		for lat in 0ms 5ms; do
			for p in 1 8 64; do
				pages=$TP_PAGES
				[[ $lat != 0ms && $p == 1 ]] && pages=$P1_LAT_PAGES
				start_site -pages "$pages" -size 16 -links 10 -latency "$lat"
				runs "$RUNS" throughput "${pages}p 16KB lat=$lat P=$p" 0 -p "$p"
			done
		done
		;;
	politeness)
		start_site -hosts "$POL_HOSTS" -pages "$POL_PAGES" -size 16 -links 10
		ideal=$((POL_HOSTS * 10))
		runs "$RUNS" politeness "${POL_HOSTS}h×${POL_PAGES}p delay=100ms hostpar=1 P=8" "$ideal" \
			-p 8 -host-par 1 -delay 100ms -hosts "${bases// /,}"
		;;
	rate)
		start_site -pages "$RATE_PAGES" -size 16 -links 10
		runs "$RUNS" rate "${RATE_PAGES}p delay=100ms hostpar=2" 10 -p 2 -host-par 2 -delay 100ms
		;;
	memory)
		start_site -pages "$MEM_PAGES" -size 16 -links 10
		runs "$MEM_RUNS" memory "${MEM_PAGES}p 16KB P=64" 0 -p 64
		;;
	*)
		echo "unknown scenario $sc" >&2
		exit 2
		;;
	esac
done
stop_site

mem_gb=$(awk '/MemTotal/ {printf "%.1f", $2/1048576}' /proc/meminfo)
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
{
	echo "# magpie bench results"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- machine: $(nproc) cores (${cpu:-unknown CPU}), ${mem_gb} GB RAM, $(go version | cut -d' ' -f3-)"
	echo "- mode: $([[ $QUICK == 1 ]] && echo "QUICK (small sizes)" || echo full), runs per cell: $RUNS (memory: $MEM_RUNS), medians shown"
	echo "- command: \`QUICK=$QUICK RUNS=$RUNS SCENARIOS=\"$SCENARIOS\" IMPLS=\"$(echo $IMPLS)\" bench/run.sh\`"
	[[ -n $NOTE ]] && echo "- note: $NOTE"
	echo
	echo "Site and crawler share the machine. pages = 2xx responses the crawler saw; dup fetches = requests"
	echo "beyond the first for a path (robots.txt excluded); new conns = TCP connections that carried a crawler"
	echo "request; max in flight = most requests the site was serving at once; min start gap = smallest time"
	echo "between two request starts on one host, p5 start gap the 5th percentile of those gaps over all hosts (one small gap can be"
	echo "client-side jitter: the site measures arrivals, and a host's first request also pays the TCP dial);"
	echo "site pages/s = sum over hosts of (starts-1)/span."
	echo "Ratios are magpie ÷ peer for pages/s, CPU s and peak RSS (the peer of magpie-async is colly-async,"
	echo "of magpie-queue colly-queue). Colly politeness uses one LimitRule per host (Colly's semaphore is per"
	echo "rule); magpie uses one \"*\" rule (Parallelism 1 per host) with Workers(8) (async) or 8 queue threads."
	echo "magpie-async also sets Workers(P) in every scenario: its download pool is fixed (16 by default)."
	echo "In the politeness and rate tables pages/s above the ideal means the limit was broken, so a"
	echo "magpie/Colly pages/s ratio below 1 there is Colly going too fast, not magpie being slow."
	echo
	"$bin/report" <"$JSONL"
} >"$OUT"
echo "wrote $OUT" >&2
