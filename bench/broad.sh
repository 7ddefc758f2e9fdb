#!/usr/bin/env bash
# broad.sh — issue 29's broad crawl: magpie against Colly and the raw crawler
# on thousands of hosts, and the state magpie keeps per host.
#
# Runs run.sh's broad scenario at $BROAD_HOSTS (default "200 2000 20000:5":
# 50 pages per host, 5 at 20,000 hosts), $RUNS round(s) (default 1) of
# $BROAD_IMPLS (default raw colly-async magpie-async, and magpie-async@old
# when OLD_REF is set), then the root package's and limits' per-host state
# tests, which print the bytes a host costs the robots.txt cache, the
# in-memory frontier (a host with links pending) and the
# Gate at 2,000 and 20,000 hosts. Each crawler's pages/s is set against two
# ideals: hosts ÷ Delay, and the site's simulated crawl of the same links
# (site -ideal, cmd/site/ideal.go: no fetch time, unlimited workers, a page
# fetched once linked and its host's Delay allows), with robots.txt one of
# its host's requests / taking no turn. The tables go to $OUT (default
# $TMPDIR/magpie-broad.md, not RESULTS.md: paste what is worth keeping), the
# JSON lines to $JSONL.
#
#   OLD_REF=9a4f221 bench/broad.sh                 # before and after in one run
#   BROAD_HOSTS="2000" RUNS=3 bench/broad.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

export SCENARIOS=broad
export RUNS=${RUNS:-1}
export BROAD_HOSTS=${BROAD_HOSTS:-"200 2000 20000:5"}
export OUT=${OUT:-${TMPDIR:-/tmp}/magpie-broad.md}
export JSONL=${JSONL:-${TMPDIR:-/tmp}/magpie-broad.jsonl}
if [[ -z ${BROAD_IMPLS:-} ]]; then
	BROAD_IMPLS="raw colly-async magpie-async"
	[[ -n ${OLD_REF:-} ]] && BROAD_IMPLS="$BROAD_IMPLS magpie-async@old"
fi
export BROAD_IMPLS
echo "broad: $(uptime)" >&2
"$here/run.sh"

# Per-host state, measured from the heap (runtime.MemStats.HeapAlloc before
# and after creating it for N hosts, ÷ N).
{
	echo
	echo "### Per-host state (heap bytes per host, \`go test -run 'PerHost' -v\`)"
	echo
	echo '```'
	(cd "$here/.." && go test -count=1 -run 'TestRobotsCachePerHost|TestFrontierPerHostState' -v . &&
		go test -count=1 -run 'TestGatePerHostState' -v ./limits) | grep -E 'bytes per host|^(ok|FAIL|---)'
	echo '```'
} >>"$OUT"
echo "wrote $OUT" >&2
