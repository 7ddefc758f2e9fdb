#!/usr/bin/env bash
# manuals.sh — what StreamHTML saves the CLI on real documentation: the
# HTML manuals Debian ships (python3-doc, postgresql-doc), served by nginx
# (Debian's package) on a free port of 127.0.0.1, crawled by `magpie crawl`
# built from this tree, once with its own selectors (title and a[href]:
# the library matches them while tokenizing, StreamHTML) and once with
# --follow 'html a[href]' (the same links, but a selector that looks above
# its element, so every page's whole tree is built, as for a collector
# without StreamHTML: by the streamer where that is html.Parse's tree, else
# by html.Parse). The two crawls of a manual must write the same items (url,
# status, title, links); the script exits 1 when they do not.
#
# Prints a markdown table on stdout: per manual and mode, medians over the
# rounds of wall seconds, CPU seconds (user + system of the crawler) and
# peak RSS, and streamed ÷ whole.
#
#   RUNS=5        rounds; the two modes alternate within a round
#   P=16          --parallel (requests in flight per host)
#   MANUALS="python postgres"
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
P=${P:-16}
MANUALS=${MANUALS:-"python postgres"}
. ./bench/nginx.sh
work=$(mktemp -d)
cleanup() {
	nginx_stop "$work"
	rm -rf "$work"
}
trap cleanup EXIT

declare -A dir=(
	[python]=$(ls -d /usr/share/doc/python3-doc/html 2>/dev/null || true)
	[postgres]=$(ls -d /usr/share/doc/postgresql-doc-*/html 2>/dev/null | tail -1 || true)
)
mkdir -p "$work/root" "$work/nginx"
for m in $MANUALS; do
	[[ -n ${dir[$m]} ]] || { echo "manuals: no $m manual (apt-get install python3-doc postgresql-doc)" >&2; exit 1; }
	ln -s "$(readlink -f "${dir[$m]}")" "$work/root/$m"
done

go build -o "$work/magpie" ./cmd/magpie

nginx_serve "$work" "$work/root" "${MANUALS%% *}/index.html"

jsonl=$work/runs.jsonl
: >"$jsonl"
echo "manuals: $(uptime)" >&2
status=0
for round in $(seq "$RUNS"); do
	for m in $MANUALS; do
		for mode in streamed whole; do
			follow="a[href]"
			[[ $mode == whole ]] && follow="html a[href]"
			out=$work/$m-$mode.jsonl
			# %e wall s, %U user s, %S system s, %M peak RSS KB
			/usr/bin/time -f '%e %U %S %M' -o "$work/time" "$work/magpie" crawl "$base/$m/index.html" \
				--follow "$follow" --parallel "$P" --allow-loopback -q -o "$out" 2>"$work/stderr" || {
				echo "manuals: $m $mode failed:" >&2
				cat "$work/stderr" >&2
				exit 1
			}
			read -r wall user sys rss <"$work/time"
			pages=$(wc -l <"$out")
			jq -n -c --arg m "$m" --arg mode "$mode" --argjson round "$round" --argjson pages "$pages" \
				--argjson wall "$wall" --argjson cpu "$(echo "$user + $sys" | bc)" --argjson rss "$rss" \
				'{manual:$m, mode:$mode, round:$round, pages:$pages, wall_s:$wall, cpu_s:$cpu, rss_kb:$rss}' >>"$jsonl"
			# What each page's item says, whatever the path that found it
			# first (depth depends on the order of a parallel crawl).
			jq -c '{url, status, title, links}' "$out" | sort >"$work/$m-$mode.items"
		done
		if ! cmp -s "$work/$m-streamed.items" "$work/$m-whole.items"; then
			echo "manuals: $m round $round: streamed and whole crawls wrote different items:" >&2
			diff "$work/$m-streamed.items" "$work/$m-whole.items" | head -20 >&2
			status=1
		fi
	done
done

jq -s -r '
def med(f): map(f) | sort | .[(length - 1) / 2 | floor];
def r2: . * 100 | round / 100;
"| manual | pages | rounds | streamed wall s | whole wall s | streamed CPU s | whole CPU s | CPU streamed ÷ whole | pages/s streamed ÷ whole | streamed peak RSS MB | whole peak RSS MB |",
"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
(group_by(.manual)[] | . as $g |
 ($g | map(select(.mode == "streamed"))) as $s | ($g | map(select(.mode == "whole"))) as $w |
 "| \($g[0].manual) | \($s[0].pages) | \($s | length) | \($s | med(.wall_s) | r2) | \($w | med(.wall_s) | r2) | \($s | med(.cpu_s) | r2) | \($w | med(.cpu_s) | r2) | \(($s | med(.cpu_s)) / ($w | med(.cpu_s)) | r2) | \(($w | med(.wall_s)) / ($s | med(.wall_s)) | r2) | \($s | med(.rss_kb) / 1024 | round) | \($w | med(.rss_kb) / 1024 | round) |")' "$jsonl"
exit $status
