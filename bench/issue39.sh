#!/usr/bin/env bash
# issue39.sh — every figure of issue 39's point 5, old beside new, in one
# run: run.sh's ip, priority, memory and broad scenarios with magpie's async
# collector and queue runs (memory queue, sqlitestore, redisstore), each
# beside its IMPL@old built from $OLD_REF, then the bytes per host of each
# store's host-aware queue (magpie/hostbytes, this tree only). The tables
# are appended to $OUT (default $TMPDIR/magpie-issue39.md; not RESULTS.md:
# paste what is worth keeping), under one "## Issue 39" heading with the
# command, the commits and the load; the crawls' JSON lines go to $JSONL.
#
#   1. ip: $IP_HOSTS hosts (default 100; QUICK: 20) on the ports of
#      127.0.0.1, $IP_PAGES pages each, Delay $IP_DELAY_MS ms (default 50),
#      Parallelism 1, -politeness ip: the smallest gap between two page
#      starts at the address and the gaps shorter than the Delay (want 0).
#   2. priority: a site of $PRIO_HOSTS hosts × $PRIO_PAGES pages whose links
#      carry a rank, the crawl ranked by Prioritize from the URL (and not, the
#      baseline) and stopped after $PRIO_N requests (MaxRequests, and the
#      crawl's context ended): the share of the N highest-ranked pages known
#      that were fetched, against a simulated best-first crawl.
#   3. memory: $SP_PAGES single-host pages (default 200,000; QUICK: 5,000),
#      P=64, $SP_RUNS round(s) (default 1): the queue paths $SP_IMPLS
#      (default magpie-queue magpie-queue-add magpie-queue-sqlite
#      magpie-queue-redis), pages/s, CPU and peak RSS ÷ @old.
#   4. broad: $BROAD39_HOSTS (default "2000:50 20000:5", HOSTS:PAGES; QUICK:
#      "100:5 1000:2") hosts, one loopback address each, robots.txt, Delay
#      $BROAD39_DELAY_MS ms (default 2000; QUICK: 200), P=64, by
#      $BROAD39_IMPLS (default magpie-async magpie-queue magpie-queue-sqlite
#      magpie-queue-redis): pages/s ÷ the site's discovery ideal (site
#      -ideal), and the most entries each run held leased and requests
#      parked in the gate (crawl-magpie -sample 500ms; the async collector
#      has no queue). The open-file limit is raised for the largest size
#      (hard and soft: 2 × hosts + 4096; root can) and the script says when
#      it cannot.
#   5. per-host bytes: $HB_HOSTS hosts (default 10,000; QUICK: 2,000)
#      pushed into the memory queue, sqlitestore and redisstore through
#      storage.HostQueue (a store without it is reported not measured),
#      Redis on a redis-server of the script's own.
#
# Knobs: OLD_REF (default 2711625, main before the host-aware stores and
# priority; empty: no old build), RUNS (default 1; the ip, priority and broad
# rounds), ISSUE39="ip priority memory broad hostbytes" (a subset to run),
# and run.sh's own (PRIO_*, IP_*, OLD_TAGS, CRAWL_TIMEOUT, REDIS_ADDR for the
# crawls). QUICK=1 is a smoke run of a few minutes.
#
#   OLD_REF=2711625 bench/issue39.sh              # the whole thing
#   QUICK=1 OLD_REF=main bench/issue39.sh         # smoke
#   ISSUE39=broad BROAD39_HOSTS=2000:50 RUNS=3 bench/issue39.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOWORK=off

QUICK=${QUICK:-0}
export QUICK
OLD_REF=${OLD_REF-2711625}
export OLD_REF
export RUNS=${RUNS:-1}
ISSUE39=${ISSUE39:-"ip priority memory broad hostbytes"}
OUT=${OUT:-${TMPDIR:-/tmp}/magpie-issue39.md}
JSONL=${JSONL:-${TMPDIR:-/tmp}/magpie-issue39.jsonl}
if [[ $QUICK == 1 ]]; then
	export IP_HOSTS=${IP_HOSTS:-20}
	SP_PAGES=${SP_PAGES:-5000}
	BROAD39_HOSTS=${BROAD39_HOSTS:-"100:5 1000:2"}
	BROAD39_DELAY_MS=${BROAD39_DELAY_MS:-200}
	HB_HOSTS=${HB_HOSTS:-2000}
else
	SP_PAGES=${SP_PAGES:-200000}
	BROAD39_HOSTS=${BROAD39_HOSTS:-"2000:50 20000:5"}
	BROAD39_DELAY_MS=${BROAD39_DELAY_MS:-2000}
	HB_HOSTS=${HB_HOSTS:-10000}
fi
SP_RUNS=${SP_RUNS:-1}
SP_IMPLS=${SP_IMPLS:-"magpie-queue magpie-queue-add magpie-queue-sqlite magpie-queue-redis"}
BROAD39_IMPLS=${BROAD39_IMPLS:-"magpie-async magpie-queue magpie-queue-sqlite magpie-queue-redis"}

work=$(mktemp -d)
redis_pid=""
cleanup() {
	if [[ -n $redis_pid ]]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# with_old LIST — LIST with each impl followed by IMPL@old when OLD_REF is set.
with_old() {
	local impl out=""
	for impl in $1; do
		out="$out $impl"
		[[ -n $OLD_REF ]] && out="$out $impl@old"
	done
	echo $out
}

# raise_nofile N — raises the hard and soft open-file limits to N when they
# are lower (the hard one needs root's CAP_SYS_RESOURCE) and sets
# $nofile_note, which says what it got and, when it could not, why.
nofile_note=""
raise_nofile() {
	local want=$1
	if [[ $(ulimit -Hn) != unlimited ]] && (($(ulimit -Hn) < want)); then
		ulimit -Hn "$want" 2>/dev/null ||
			nofile_note="could not raise the hard limit to $want (it needs root with CAP_SYS_RESOURCE, up to fs.nr_open $(cat /proc/sys/fs/nr_open 2>/dev/null || echo ?)); magpie then caps its idle connections at half the limit, so some requests of the largest size dial again. "
	fi
	if [[ $(ulimit -Sn) != unlimited ]] && (($(ulimit -Sn) < want)); then
		ulimit -Sn "$want" 2>/dev/null || ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
	fi
	nofile_note="${nofile_note}open-file limit soft $(ulimit -Sn), hard $(ulimit -Hn), for $want wanted (2 × hosts + 4096)"
	echo "issue39: $nofile_note" >&2
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$SECONDS
date_start=$(date -u '+%Y-%m-%d %H:%M')
echo "issue39: $(uptime)" >&2

# 1-4: one run.sh, so one build of the new and the old crawlers.
scenarios=""
for sc in ip priority memory broad; do
	[[ " $ISSUE39 " == *" $sc "* ]] && scenarios="$scenarios $sc"
done
if [[ -n $scenarios ]]; then
	if [[ " $scenarios " == *" broad "* ]]; then
		most=0
		for size in $BROAD39_HOSTS; do
			most=$((${size%%:*} > most ? ${size%%:*} : most))
		done
		raise_nofile $((2 * most + 4096))
	fi
	SCENARIOS="$scenarios" OUT="$work/run.md" JSONL="$JSONL" \
		IMPLS="$(with_old "$SP_IMPLS")" MEM_PAGES="$SP_PAGES" MEM_RUNS="$SP_RUNS" \
		BROAD_HOSTS="$BROAD39_HOSTS" BROAD_DELAY_MS="$BROAD39_DELAY_MS" BROAD_IMPLS="$(with_old "$BROAD39_IMPLS")" \
		"$here/run.sh"
fi

# 5: bytes per host, on a Redis of our own (used_memory of a shared one
# moves with others' keys).
hb_out=$work/hostbytes.md
if [[ " $ISSUE39 " == *" hostbytes "* ]]; then
	(cd "$here/magpie" && go build -o "$work/hostbytes" ./hostbytes)
	port=""
	for p in $(seq 16480 16579); do
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { port=$p; break; }
	done
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
	redis_pid=$!
	for _ in $(seq 100); do
		redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.05
	done
	echo "issue39: hostbytes, $HB_HOSTS hosts" >&2
	"$work/hostbytes" -hosts "$HB_HOSTS" -redis "127.0.0.1:$port" >"$hb_out" || echo "issue39: hostbytes failed (its table says where)" >&2
fi

new=$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo ?)
[[ -n $(git -C "$here/.." status --porcelain 2>/dev/null) ]] && new="$new with uncommitted changes"
old="none"
[[ -n $OLD_REF ]] && old="magpie at \`$OLD_REF\` ($(git -C "$here/.." rev-parse --short "$OLD_REF" 2>/dev/null || echo ?)), built with this bench's crawlers (IMPL@old)"
{
	echo
	echo "## Issue 39: broad, priority, politeness by address and per-host state, old beside new ($date_start UTC)"
	echo
	echo "- command: \`OLD_REF=$OLD_REF QUICK=$QUICK RUNS=$RUNS SP_PAGES=$SP_PAGES SP_RUNS=$SP_RUNS SP_IMPLS=\"$SP_IMPLS\" BROAD39_HOSTS=\"$BROAD39_HOSTS\" BROAD39_DELAY_MS=$BROAD39_DELAY_MS BROAD39_IMPLS=\"$BROAD39_IMPLS\" HB_HOSTS=$HB_HOSTS ISSUE39=\"$ISSUE39\" bench/issue39.sh\` (and run.sh's PRIO_* and IP_* defaults, see its header)"
	echo "- new: this tree at $new; old: $old"
	[[ -n $nofile_note ]] && echo "- broad: $nofile_note"
	echo "- machine: $(nproc) cores, $(go version | cut -d' ' -f3-); load average (1, 5, 15 min) $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; $((SECONDS - t0)) s in all"
	echo
	echo "The tables below, in order: politeness by address (the ip scenario), priority (a crawl stopped after N"
	echo "requests), \"Memory\" ($SP_PAGES single-host pages, 16 KB, P=64: the queue paths), the broad crawls, and the"
	echo "bytes per host of each store. See bench/README.md and the header of bench/run.sh for what each column is."
	echo
	[[ -s $work/run.md ]] && sed -n '/^### /,$p' "$work/run.md"
	if [[ -s $hb_out ]]; then
		echo "### Bytes per host of the host-aware queues (\`magpie/hostbytes -hosts $HB_HOSTS\`)"
		echo
		cat "$hb_out"
		echo
	fi
} >>"$OUT"
echo "issue39: appended to $OUT" >&2
