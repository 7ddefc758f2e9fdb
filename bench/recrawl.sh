#!/usr/bin/env bash
# recrawl.sh — issue 30's recrawl benchmark. For each store and for nginx
# with and without validators: copies the PostgreSQL manual
# (/usr/share/doc/postgresql-doc-*/html) to a temporary directory, starts
# nginx (Debian's package) on a free port of 127.0.0.1 serving it, and runs
# bench/magpie/recrawl, which crawls it once as a queue run over the store,
# changes 20 pages, deletes 5, adds 5 linked from a changed one, crawls
# again over the same store, and checks that the second crawl reports
# exactly 20 changed, 5 gone, 5 new and every other page unchanged. Prints
# a markdown table (one row per run) on stdout; the JSON lines go to
# $OUT (default: a temporary file, named on stderr).
#
#   STORES="memory sqlite redis"   the stores (redis: starts its own
#                                  redis-server on a free port, or uses
#                                  REDIS_ADDR)
#   VALIDATORS="on off"            nginx with ETag/If-Modified-Since, or
#                                  `etag off; if_modified_since off;`
#   RUNS=1                         runs per cell
#   P=8                            threads and per-host parallelism
#
# It exits 1 when a run's counts are not exactly the edits.
set -euo pipefail
cd "$(dirname "$0")"
export GOWORK=off
STORES=${STORES:-"memory sqlite redis"}
VALIDATORS=${VALIDATORS:-"on off"}
RUNS=${RUNS:-1}
P=${P:-8}
manual=$(ls -d /usr/share/doc/postgresql-doc-*/html | tail -1)
. ./nginx.sh
work=$(mktemp -d)
OUT=${OUT:-$work/recrawl.jsonl}
redis_port=""
cleanup() {
	nginx_stop "$work"
	[[ -n $redis_port ]] && redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$work/root" "$work/nginx" "$work"/*.db*
}
trap cleanup EXIT

(cd magpie && go build -o "$work/recrawl" ./recrawl)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_nginx VALIDATORS: serves $work/root; sets $base.
start_nginx() {
	local v="etag on; if_modified_since exact;"
	[[ $1 == off ]] && v="etag off; if_modified_since off;"
	nginx_serve "$work" "$work/root" index.html "$v"
}

stop_nginx() { nginx_stop "$work"; }

if [[ " $STORES " == *" redis "* && -z ${REDIS_ADDR:-} ]]; then
	redis_port=$(free_port)
	redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --daemonize yes >/dev/null
	REDIS_ADDR=127.0.0.1:$redis_port
	for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

echo "JSON lines: $OUT" >&2
status=0
for v in $VALIDATORS; do
	for store in $STORES; do
		for run in $(seq "$RUNS"); do
			rm -rf "$work/root" "$work"/*.db* && mkdir "$work/root"
			cp -L "$manual"/* "$work/root/"
			start_nginx "$v"
			flags=(-url "$base" -root "$work/root" -store "$store" -p "$P" -validators=$([[ $v == on ]] && echo true || echo false))
			[[ $store == sqlite ]] && flags+=(-db "$work/st.db")
			[[ $store == redis ]] && flags+=(-redis "$REDIS_ADDR")
			echo "recrawl: $store, validators $v, run $run (load $(cut -d' ' -f1 /proc/loadavg))" >&2
			"$work/recrawl" "${flags[@]}" >>"$OUT" || status=1
			stop_nginx
		done
	done
done

# One row per (validators, store): medians of the runs' wall times; bytes
# and counts are the same in every run (exact says whether all were).
jq -s -r '
def med(f): map(f) | sort | .[(length - 1) / 2 | floor];
"| store | server validators | runs | pages | first crawl, s | second crawl, s | second ÷ first | first crawl body bytes | second crawl body bytes | bytes, second ÷ first | new | changed | unchanged | gone | exact in every run |",
"| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
(group_by([(.validators | not), .store])[] |
 (med(.first_wall_s)) as $w1 | (med(.second_wall_s)) as $w2 | .[0] as $r |
 "| \($r.store) | \(if $r.validators then "ETag, Last-Modified" else "none (digest)" end) | \(length) | \($r.pages) | \($w1*100|round/100) | \($w2*100|round/100) | \($w2/$w1*100|round/100) | \($r.first_bytes) | \(med(.second_bytes)) | \(med(.second_bytes)/$r.first_bytes*10000|round/100)% | \($r.new) | \($r.changed) | \($r.unchanged) | \($r.gone) | \(if all(.[]; .exact) then "yes" else "NO" end) |")' "$OUT"
exit $status
