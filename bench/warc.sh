#!/usr/bin/env bash
# warc.sh — issue 31: what archiving costs a crawl, old code beside new.
#
# Builds warc/'s BenchmarkArchiveCost twice, from this tree and from
# $OLD_REF (default 9a4f221, before the archiving work of this branch), both
# with this tree's warc/bench_test.go, then crawls with each binary, one
# process per crawl, without archiving and with it, in alternation:
# for each page count, $RUNS rounds of old-plain, old-archive, new-plain,
# new-archive. Prints a markdown table of each crawl (pages/s, CPU ms per
# page, peak RSS of the process, which also serves the site) and the
# archive/plain ratio of pages/s within each round.
#
#   PAGES="2000 20000"   site sizes (the peak RSS at both says whether
#                        archiving's memory grows with the crawl)
#   RUNS=1               rounds per size
#   OLD_REF=9a4f221
#
# Run from anywhere: bench/warc.sh. Everything is on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OLD_REF=${OLD_REF:-9a4f221}
PAGES=${PAGES:-"2000 20000"}
RUNS=${RUNS:-1}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/old"
git -C "$root" archive "$OLD_REF" | tar -x -C "$work/old"
cp "$root/warc/bench_test.go" "$work/old/warc/bench_test.go"
(cd "$work/old" && go test -c -o "$work/old.test" ./warc/)
(cd "$root" && go test -c -o "$work/new.test" ./warc/)

# crawl IMPL MODE PAGES prints "pages/s cpu-ms/page peak-rss-MB".
crawl() {
	MAGPIE_WARC_BENCH_PAGES=$3 MAGPIE_WARC_BENCH_MODE=$2 "$work/$1.test" \
		-test.run '^$' -test.bench '^BenchmarkArchiveCost$' -test.benchtime 1x -test.benchmem=false |
		awk '/^BenchmarkArchiveCost/ {
			for (i = 1; i < NF; i++) m[$(i+1)] = $i
			printf "%s %s %s\n", m["pages/s"], m["cpu-ms/page"], m["peak-rss-MB"]
		}'
}

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| pages | round | code | plain pages/s | archive pages/s | ratio | plain CPU ms/page | archive CPU ms/page | plain peak RSS MB | archive peak RSS MB | load |"
echo "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for pages in $PAGES; do
	for r in $(seq "$RUNS"); do
		for impl in old new; do
			load=$(cut -d' ' -f1 /proc/loadavg)
			read -r pr pc pm < <(crawl "$impl" plain "$pages")
			read -r ar ac am < <(crawl "$impl" archive "$pages")
			ratio=$(awk -v a="$ar" -v p="$pr" 'BEGIN { printf "%.2f", a / p }')
			label=$impl
			[ "$impl" = old ] && label="old ($OLD_REF)"
			printf '| %s | %s | %s | %.0f | %.0f | %s | %.3f | %.3f | %.0f | %.0f | %s |\n' \
				"$pages" "$r" "$label" "$pr" "$ar" "$ratio" "$pc" "$ac" "$pm" "$am" "$load"
		done
	done
done
