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
#   SCENARIOS="throughput politeness rate memory"   subset to run; the opt-in
#                  scenarios "storage", "cluster", "issue20" and "broad" (see below) are never run by default
#   IMPLS="raw colly-async ..."   default: every impl of both crawl binaries but the storage ones
#                  and issue 20's (*-queue-add* and *-stream, which run in the issue20 scenario or when named here);
#                  magpie-queue-redis (the queue on redisstore) starts a redis-server of its own
#                  (or uses $REDIS_ADDR) and is left out of the default when redis-server is missing
#   TP_LATENCIES="0ms 5ms"        the throughput scenario's site latencies
#   TP_PS="1 8 64"                the throughput scenario's parallelisms
#   OLD_REF=<git ref>  also build magpie as of that commit (with this bench's
#                  crawl code) and add its crawlers as IMPL@old (magpie-async@old,
#                  ...), so a report shows an older magpie beside this one,
#                  measured in the same run
#   APPEND=1       keep $JSONL's lines from an earlier run and report them too
#   MAGPIE=0       do not build the bench/magpie module (magpie-* impls); default 1
#   NOTE="..."     a line added under the machine description in the results
#   OUT=path JSONL=path
#
# The storage scenario (SCENARIOS=storage; the magpie build only) measures
# magpie's persistent stores: peak RSS of a crawl whose frontier reaches
# $FRONTIER requests (default 1,000,000; QUICK: 50,000) with sqlitestore as
# queue and visited set, and with the in-memory queue; the Redis visited set's
# bytes per ID (the redisstore VisitedMemory test); and pages/s of 1 against 3
# worker processes sharing one Redis on a site with 50 ms latency
# ($REDIS_PAGES pages, default 5000; QUICK: 500; $REDIS_P threads per
# process, a list, default "8 4": one crawl pair per value). It starts its own redis-server on a free port unless
# REDIS_ADDR is set. Its results replace the "## Storage" section of $OUT and
# leave the rest of the file alone; the other scenarios rewrite the rest and
# keep that section.
#
# The cluster scenario (SCENARIOS=cluster; the magpie build only, opt-in)
# sets one Redis against a Redis Cluster of 3 masters with a replica each
# (both started here on free loopback ports, or $REDIS_ADDR and
# $CLUSTER_ADDRS): the visited set's and the frontier's bytes on the cluster
# (the redisstore ClusterVisitedMemory test), then pages/s of 1 and 3 worker
# processes (magpie-redis, $CL_P threads each, default 8) on a site of
# $CL_HOSTS hosts (default 20) × $CL_PAGES pages (default 250; QUICK: 20)
# with 50 ms latency, and queue operations/s (magpie-redis-ops: Push 10,
# Lease 10, Ack, for $OPS_FOR, default 10s; QUICK: 3s) of 1 and 3 processes
# of 4 goroutines, each on the node and on the cluster. Its results replace
# only the "## Redis Cluster" section of $OUT.
#
# The issue20 scenario (SCENARIOS=issue20, opt-in) measures the rows of issue
# 20's table in one run: every crawler of $I20_IMPLS once per round on a site of
# $I20_PAGES pages (default 20,000; QUICK: 1,000) of 16 KB with 10 links at
# 0 ms latency, $I20_P threads or workers (default 64), then the crawlers of
# $I20_RSS_IMPLS on $I20_RSS_PAGES pages (default 200,000; QUICK: 10,000), $MEM_RUNS
# round(s), for their peak RSS. Defaults:
#   I20_IMPLS="raw colly-async magpie-async magpie-async-stream magpie-queue
#              magpie-queue-add magpie-queue-add-stream
#              magpie-queue-sqlite magpie-queue-add-sqlite magpie-queue-redis
#              magpie-queue-add-redis"
#   I20_RSS_IMPLS="magpie-queue magpie-queue-add colly-queue-add"
# (IMPLS does not apply), each magpie-* one followed by IMPL@old when OLD_REF is
# set; impls that were not built (MAGPIE=0, no redis-server) are left out. Its
# results (issue 20's table of ratios, old beside new, then the crawls' own
# tables) replace only the "## Issue 20: Colly's queue idiom" section of $OUT,
# at its end, with the load average seen at each crawl's start (the machine
# may be shared). With RUNS=1 MEM_RUNS=1 and OLD_REF set it took 17.5 minutes
# on 2 cores at a load average of 9-18 (the five 200,000-page crawls 11 of
# them, the AddURL crawls on SQLite and Redis about a minute each); less on a
# quieter machine.
#
# The broad scenario (SCENARIOS=broad, opt-in) crawls a site of
# $BROAD_HOSTS hosts (a list, default "200 2000"; QUICK: 200; HOSTS:PAGES
# for other pages per host than $BROAD_PAGES, e.g. "200 2000 20000:5"), each
# on its own loopback address of one port (site -loopback -one-listener)
# with a robots.txt, and $BROAD_PAGES pages per host (default 50; QUICK: 10),
# with Delay $BROAD_DELAY_MS ms (default 200) and
# Parallelism 1 per host and 64 workers, by each crawler of $BROAD_IMPLS
# (default "raw colly-async magpie-async"; IMPLS does not apply). The ideal
# is hosts / Delay pages/s (10,000 at 2,000 hosts and 200 ms: more than two
# cores can crawl; BROAD_DELAY_MS=2000 brings it within their reach). Each size raises the open-file limit to
# 2 × hosts + 4096 when it can (the crawler's idle connections, one per
# host, and the site's ends of them) and says so when it cannot (bench/broad.sh
# runs the sizes of issue 29). magpie's crawlers run with -sample
# $BROAD_SAMPLE (default 500ms): the table's "most leased / parked" is the
# most queue entries the run held leased and requests parked in the gate at
# one reading (– leased for the async collector, which has no queue).
#
# The priority scenario (SCENARIOS=priority, opt-in; issue 39) crawls a
# site of $PRIO_HOSTS hosts (default 4) × $PRIO_PAGES pages (default 5,000;
# QUICK: 1,000) whose links carry their page's rank (site -rank), with
# $PRIO_P threads (default 8) and no Delay, until it stops after
# $PRIO_N requests (default 500; QUICK: 100), once per way of stopping in
# $PRIO_STOPS (default "max-requests stop-after": MaxRequests, or the
# crawl's context ended once it has N pages), by each crawler of
# $PRIO_IMPLS (default "magpie-async magpie-queue magpie-queue-sqlite
# magpie-queue-redis", each with IMPL@old when OLD_REF is set), each with
# -prioritize (Prioritize ranks a link by its URL's rank; order=rank) and
# without (order=none, the baseline; an old tree without Prioritize runs
# this one only). The site reports the share of the N highest-ranked
# pages the crawl knew that it fetched; -ideal-rank gives the share of a
# best-first and of a rank-blind crawl of N pages one at a time.
#
# The ip scenario (SCENARIOS=ip, opt-in; issue 39) serves $IP_HOSTS hosts
# (default 100) on as many ports of 127.0.0.1, $IP_PAGES pages each (default
# 5; QUICK: 2), recording page starts by address (site -addr-gap), and
# crawls it with Delay $IP_DELAY_MS ms (default 50), Parallelism 1 and
# $IP_P workers (default 8), -politeness ip (PolitenessBy(PolitenessIP); an
# old tree without it runs per host), by each crawler of $IP_IMPLS (the
# default of PRIO_IMPLS, with IMPL@old). The table gives the smallest gap
# between two page starts at the address and the gaps shorter than the
# Delay, in the worst run (want none).
#
# Trees older than Prioritize or PolitenessBy (the new tree or OLD_REF's)
# are built with the magpie_noprio, magpie_nopoliteness or magpie_nodashboard tag (found by
# grepping the tree), so the crawlers build from any of them; "-features"
# says which the binary has.
#
# A full run is sized for about 20 minutes on 2 idle cores (QUICK timings on a
# loaded shared machine extrapolate to 25-40 min there); the one exception to
# the brief's sizes is throughput at latency 5 ms with P=1, which is crawled
# with P1_LAT_PAGES pages (default 2000) because 20,000 sequential 5 ms
# fetches take 100 s per run and implementation.
set -euo pipefail
export GOWORK=off # bench/ modules are not in the repository go.work (they pin other versions)

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
	FRONTIER=${FRONTIER:-50000}
	REDIS_PAGES=${REDIS_PAGES:-500}
	CL_PAGES=${CL_PAGES:-20}
	OPS_FOR=${OPS_FOR:-3s}
	I20_PAGES=${I20_PAGES:-1000}
	I20_RSS_PAGES=${I20_RSS_PAGES:-10000}
	BROAD_HOSTS=${BROAD_HOSTS:-200}
	BROAD_PAGES=${BROAD_PAGES:-10}
	PRIO_PAGES=${PRIO_PAGES:-1000}
	PRIO_N=${PRIO_N:-100}
	IP_PAGES=${IP_PAGES:-2}
else
	RUNS=${RUNS:-3}
	TP_PAGES=${TP_PAGES:-20000}
	P1_LAT_PAGES=${P1_LAT_PAGES:-2000}
	POL_HOSTS=${POL_HOSTS:-20}
	POL_PAGES=${POL_PAGES:-100}
	RATE_PAGES=${RATE_PAGES:-200}
	MEM_PAGES=${MEM_PAGES:-200000}
	FRONTIER=${FRONTIER:-1000000}
	REDIS_PAGES=${REDIS_PAGES:-5000}
	CL_PAGES=${CL_PAGES:-250}
	OPS_FOR=${OPS_FOR:-10s}
	I20_PAGES=${I20_PAGES:-20000}
	I20_RSS_PAGES=${I20_RSS_PAGES:-200000}
	BROAD_HOSTS=${BROAD_HOSTS:-"200 2000"}
	BROAD_PAGES=${BROAD_PAGES:-50}
	PRIO_PAGES=${PRIO_PAGES:-5000}
	PRIO_N=${PRIO_N:-500}
	IP_PAGES=${IP_PAGES:-5}
fi
BROAD_SAMPLE=${BROAD_SAMPLE:-500ms}
PRIO_HOSTS=${PRIO_HOSTS:-4}
PRIO_P=${PRIO_P:-8}
PRIO_STOPS=${PRIO_STOPS:-"max-requests stop-after"}
PRIO_IMPLS=${PRIO_IMPLS:-"magpie-async magpie-queue magpie-queue-sqlite magpie-queue-redis"}
IP_HOSTS=${IP_HOSTS:-100}
IP_DELAY_MS=${IP_DELAY_MS:-50}
IP_P=${IP_P:-8}
IP_IMPLS=${IP_IMPLS:-$PRIO_IMPLS}
BROAD_IMPLS=${BROAD_IMPLS:-"raw colly-async magpie-async"}
BROAD_DELAY_MS=${BROAD_DELAY_MS:-200} # the per-host Delay of the broad scenario, in ms
I20_P=${I20_P:-64}
I20_IMPLS=${I20_IMPLS:-"raw colly-async magpie-async magpie-async-stream magpie-queue magpie-queue-add magpie-queue-add-stream magpie-queue-sqlite magpie-queue-add-sqlite magpie-queue-redis magpie-queue-add-redis"}
I20_RSS_IMPLS=${I20_RSS_IMPLS:-"magpie-queue magpie-queue-add colly-queue-add"}
CL_HOSTS=${CL_HOSTS:-20}
CL_P=${CL_P:-8}
CLUSTER_ADDRS=${CLUSTER_ADDRS:-}
REDIS_P=${REDIS_P:-"8 4"}
TP_LATENCIES=${TP_LATENCIES:-"0ms 5ms"}
TP_PS=${TP_PS:-"1 8 64"}
OLD_REF=${OLD_REF:-}
REDIS_ADDR=${REDIS_ADDR:-}
MEM_RUNS=${MEM_RUNS:-1}
SCENARIOS=${SCENARIOS:-"throughput politeness rate memory"}
MAGPIE=${MAGPIE:-1}
OUT=${OUT:-$here/RESULTS.md}
JSONL=${JSONL:-$here/results.jsonl}
NOTE=${NOTE:-}
CRAWL_TIMEOUT=${CRAWL_TIMEOUT:-15m}

bin=$(mktemp -d)
site_pid=""
redis_pid=""
cluster_pids=""
cleanup() {
	for pid in $site_pid $redis_pid $cluster_pids; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$bin"
}
trap cleanup EXIT

echo "building into $bin" >&2
go build -o "$bin/" ./cmd/site ./cmd/report ./cmd/crawl
# magpie and Colly need incompatible gobwas/glob versions, so the magpie
# crawlers are a second binary built from their own module.
all_impls=$("$bin/crawl" -list)
# magpie_tags TREE — the build tags of the crawlers for the magpie tree at
# TREE: one per option they use that the tree does not have yet.
magpie_tags() {
	local tags=""
	grep -qs '^func Prioritize(' "$1"/*.go || tags="$tags magpie_noprio"
	grep -qs '^func PolitenessBy(' "$1"/*.go || tags="$tags magpie_nopoliteness"
	[[ -d $1/dashboard ]] || tags="$tags magpie_nodashboard"
	echo $tags
}
new_features="" old_features=""
if [[ $MAGPIE == 1 ]]; then
	new_tags=$(magpie_tags "$here/..")
	(cd magpie && go build -tags "$new_tags" -o "$bin/crawl-magpie" .)
	all_impls="$all_impls $("$bin/crawl-magpie" -list | tr ' ' '\n' | grep '^magpie-' | tr '\n' ' ')"
	new_features=$("$bin/crawl-magpie" -features)
fi
if [[ -n $OLD_REF && $MAGPIE == 1 ]]; then
	# The old library under today's crawl code: the crawlers use only
	# the Colly-style API, so they build against older versions too.
	mkdir -p "$bin/old"
	git -C "$here/.." archive "$OLD_REF" | tar -x -C "$bin/old"
	rm -rf "$bin/old/bench"
	mkdir -p "$bin/old/bench"
	tar -C "$here" --exclude=results.jsonl -cf - . | tar -x -C "$bin/old/bench"
	# OLD_TAGS: the old tree's build tags; magpie_old leaves out the
	# StreamHTML and ReuseBody crawlers, for a tree from before StreamHTML,
	# magpie_noreuse the ReuseBody ones only ("" keeps both).
	old_tags="${OLD_TAGS-magpie_old} $(magpie_tags "$bin/old")"
	(cd "$bin/old/bench/magpie" && go build -tags "$old_tags" -o "$bin/crawl-magpie-old" .)
	all_impls="$all_impls $("$bin/crawl-magpie-old" -list | tr ' ' '\n' | grep '^magpie-' | sed 's/$/@old/' | tr '\n' ' ')"
	old_features=$("$bin/crawl-magpie-old" -features)
fi
# has_feature IMPL FEATURE — whether IMPL's binary has FEATURE (-features).
has_feature() {
	local f=$new_features
	[[ $1 == *@old ]] && f=$old_features
	[[ " $f " == *" $2 "* ]]
}
# The storage crawlers (magpie-frontier-*, magpie-redis) belong to the
# storage scenario only: the others would run them at every size.
# issue 20's Colly-idiom queue crawlers (*-queue-add*) to its scenario.
default_impls=$(echo $all_impls | tr ' ' '\n' | grep -v -e '^magpie-frontier-' -e '^magpie-redis' -e '-queue-add' -e '-stream$' -e '-ui$' | tr '\n' ' ')
if [[ -z $REDIS_ADDR ]] && ! command -v redis-server >/dev/null 2>&1; then
	default_impls=$(echo $default_impls | tr ' ' '\n' | grep -v '^magpie-queue-redis' | tr '\n' ' ')
	all_impls=$(echo $all_impls | tr ' ' '\n' | grep -v -e '^magpie-queue-redis' -e '^magpie-queue-add-redis' | tr '\n' ' ')
fi
IMPLS=${IMPLS:-$default_impls}
# APPEND=1 keeps the JSON lines of an earlier run (say, another latency) so
# that one report covers both.
[[ ${APPEND:-0} == 1 ]] || : >"$JSONL"

# broad_nofile HOSTS — raises the open-file limit for a broad crawl of HOSTS
# hosts (a connection each kept idle between its turns, in the crawler and
# in the site) and says so when it cannot; fails, skipping the size, when
# the limit is too low to run at all.
broad_nofile() {
	local want=$((2 * $1 + 4096)) have
	have=$(ulimit -Sn)
	[[ $have == unlimited ]] && return 0
	# The soft limit only: ulimit -n would lower the hard one for good.
	if ((have < want)); then
		ulimit -Sn "$want" 2>/dev/null || ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
		have=$(ulimit -Sn)
		[[ $have == unlimited ]] && return 0
	fi
	if ((have < 2048)); then
		echo "broad: open-file limit $have (hard $(ulimit -Hn)) is too low for $1 hosts; skipped (raise it: ulimit -Hn as root)" >&2
		return 1
	fi
	if ((have < want)); then
		echo "broad: open-file limit $have < $want for $1 hosts (cannot raise it; hard limit $(ulimit -Hn)): idle pools are capped at half the limit, so some requests dial again" >&2
	fi
	return 0
}

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
	local cmd=$bin/crawl run_impl=$impl
	[[ $impl == magpie-* ]] && cmd=$bin/crawl-magpie
	if [[ $impl == *@old ]]; then
		cmd=$bin/crawl-magpie-old
		run_impl=${impl%@old}
	fi
	local extra=()
	[[ $run_impl == magpie-queue-redis || $run_impl == magpie-queue-add-redis ]] && extra=(-redis "$redis_addr")
	# The flags a scenario gives magpie's crawlers only (magpie_flags).
	[[ $run_impl == magpie-* ]] && extra+=("${magpie_flags[@]}")
	# The load on a shared machine, for the issue 20 section.
	[[ $scenario == issue20* ]] && cut -d' ' -f1 /proc/loadavg >>"$bin/i20-load"
	res=$(timeout "$CRAWL_TIMEOUT" "$cmd" -impl "$run_impl" -url "$base/" "${extra[@]}" "$@" || true)
	res=${res/\"impl\":\"$run_impl\"/\"impl\":\"$impl\"}
	[[ -n $res ]] || res="{\"impl\":\"$impl\",\"err\":\"crawl produced no result\"}"
	local stats
	stats=$(curl -fsS "$base/_stats")
	printf '{"scenario":"%s","label":"%s","ideal_pps":%s,%s"run":%d,"crawl":%s,"site":%s}\n' \
		"$scenario" "$label" "$ideal" "${crawl_extra:-}" "$run" "$res" "$stats" >>"$JSONL"
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

# start_redis — sets $redis_addr: $REDIS_ADDR, or a redis-server of our own
# on a free port of 127.0.0.1 that saves nothing to disk.
start_redis() {
	[[ -n ${redis_addr:-} ]] && return
	if [[ -n $REDIS_ADDR ]]; then
		redis_addr=$REDIS_ADDR
		return
	fi
	local port
	for port in $(seq 16379 16479); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
	done
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$bin" >"$bin/redis.log" 2>&1 &
	redis_pid=$!
	redis_addr=127.0.0.1:$port
	for _ in $(seq 100); do
		redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && return
		sleep 0.05
	done
	echo "redis-server did not start (see $bin/redis.log)" >&2
	exit 1
}

# storage_scenario — see the header. The Redis memory figure goes to
# $bin/redis-mem.txt for the report.
storage_scenario() {
	local frontier_p=8
	# Hubs enough (200) that the P threads are still on hubs while the
	# frontier grows: leaves are leased only once every hub has been.
	start_site -frontier $((FRONTIER + FRONTIER / 20)) -hub-links $((FRONTIER / 200 > 0 ? FRONTIER / 200 : 1))
	for run in $(seq "$MEM_RUNS"); do
		for impl in magpie-frontier-sqlite magpie-frontier-mem ${OLD_REF:+magpie-frontier-sqlite@old magpie-frontier-mem@old}; do
			crawl storage "hubs→${FRONTIER} URLs P=$frontier_p" 0 "$run" "$impl" -p "$frontier_p" -frontier "$FRONTIER"
		done
	done
	start_redis
	echo "  storage: redisstore VisitedMemory against $redis_addr" >&2
	(cd .. && MAGPIE_REDIS_ADDR=$redis_addr MAGPIE_REDIS_MEMTEST=1 \
		go test -count=1 -run VisitedMemory -v ./storage/redisstore/) >"$bin/redis-mem.out" 2>&1 || true
	grep -E 'bytes/ID' "$bin/redis-mem.out" | sed 's/^ *//' >"$bin/redis-mem.txt" || true
	start_site -pages "$REDIS_PAGES" -size 16 -links 10 -latency 50ms
	for run in $(seq "$RUNS"); do
		for p in $REDIS_P; do
			for n in 1 3; do
				crawl storage "${REDIS_PAGES}p 16KB lat=50ms P=$p/proc" 0 "$run" magpie-redis \
					-p "$p" -redis "$redis_addr" -procs "$n"
			done
		done
	done
}

# start_cluster — sets $cluster_addrs (comma separated): $CLUSTER_ADDRS, or a
# Redis Cluster of our own: 3 masters and 3 replicas on free loopback ports
# (their bus ports, +10000, free too) that save nothing to disk.
start_cluster() {
	[[ -n ${cluster_addrs:-} ]] && return
	if [[ -n $CLUSTER_ADDRS ]]; then
		cluster_addrs=$CLUSTER_ADDRS
		return
	fi
	local port addrs=() p
	for port in $(seq 17100 17199); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
		(exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null && continue
		addrs+=("127.0.0.1:$port")
		[[ ${#addrs[@]} == 6 ]] && break
	done
	for a in "${addrs[@]}"; do
		p=${a##*:}
		redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes --cluster-config-file "$bin/nodes-$p.conf" \
			--cluster-node-timeout 2000 --save '' --appendonly no --dir "$bin" >"$bin/cluster-$p.log" 2>&1 &
		cluster_pids="$cluster_pids $!"
	done
	for a in "${addrs[@]}"; do
		for _ in $(seq 100); do
			redis-cli -h 127.0.0.1 -p "${a##*:}" ping >/dev/null 2>&1 && break
			sleep 0.05
		done
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$bin/cluster-create.log" 2>&1
	for _ in $(seq 200); do
		redis-cli -h 127.0.0.1 -p "${addrs[0]##*:}" cluster info | grep -q cluster_state:ok && break
		sleep 0.05
	done
	cluster_addrs=$(IFS=,; echo "${addrs[*]}")
}

# cluster_scenario — see the header. The memory figures go to
# $bin/cluster-mem.txt for the report.
cluster_scenario() {
	start_redis
	start_cluster
	echo "  cluster: redisstore ClusterVisitedMemory against $cluster_addrs" >&2
	(cd .. && MAGPIE_REDIS_CLUSTER_ADDRS=$cluster_addrs MAGPIE_REDIS_MEMTEST=1 \
		go test -count=1 -run ClusterVisitedMemory -v ./storage/redisstore/) >"$bin/cluster-mem.out" 2>&1 || true
	grep -E 'bytes/' "$bin/cluster-mem.out" | sed 's/^ *//' >"$bin/cluster-mem.txt" || true
	start_site -hosts "$CL_HOSTS" -pages "$CL_PAGES" -size 16 -links 10 -latency 50ms
	local where
	for run in $(seq "$RUNS"); do
		for where in node cluster; do
			local target=(-redis "$redis_addr")
			[[ $where == cluster ]] && target=(-redis-cluster "$cluster_addrs")
			for n in 1 3; do
				crawl cluster "$where: ${CL_HOSTS}h×${CL_PAGES}p lat=50ms P=$CL_P/proc" 0 "$run" magpie-redis \
					-p "$CL_P" -procs "$n" -hosts "${bases// /,}" "${target[@]}"
				crawl cluster "$where: queue ops for $OPS_FOR, 4 goroutines/proc" 0 "$run" magpie-redis-ops \
					-p 4 -procs "$n" -ops-for "$OPS_FOR" "${target[@]}"
			done
		done
	done
}

# i20_impls LIST — the impls of LIST that were built, each magpie-* one
# followed by its IMPL@old when OLD_REF built one.
i20_impls() {
	local impl out=""
	for impl in $1; do
		[[ " $all_impls " == *" $impl "* ]] && out="$out $impl"
		[[ $impl == magpie-* && " $all_impls " == *" $impl@old "* ]] && out="$out $impl@old"
	done
	echo $out
}

# issue20_scenario — see the header. Sets $i20_wall (seconds).
issue20_scenario() {
	local t0=$SECONDS saved=$IMPLS
	IMPLS=$(i20_impls "$I20_IMPLS")
	start_site -pages "$I20_PAGES" -size 16 -links 10
	runs "$RUNS" issue20 "${I20_PAGES}p 16KB lat=0ms P=$I20_P" 0 -p "$I20_P"
	IMPLS=$(i20_impls "$I20_RSS_IMPLS")
	start_site -pages "$I20_RSS_PAGES" -size 16 -links 10
	runs "$MEM_RUNS" issue20-rss "${I20_RSS_PAGES}p 16KB lat=0ms P=$I20_P" 0 -p "$I20_P"
	IMPLS=$saved
	i20_wall=$((SECONDS - t0))
}

# priority_scenario — see the header.
priority_scenario() {
	local site_flags=(-hosts "$PRIO_HOSTS" -pages "$PRIO_PAGES" -size 4 -links 10 -rank)
	start_site "${site_flags[@]}"
	crawl_extra="\"ideal_rank\":$("$bin/site" "${site_flags[@]}" -ideal-rank "$PRIO_N"),"
	local run stop impl order
	for run in $(seq "$RUNS"); do
		for stop in $PRIO_STOPS; do
			for impl in $(i20_impls "$PRIO_IMPLS"); do
				for order in rank none; do
					# A tree without Prioritize has only the baseline.
					[[ $order == rank ]] && ! has_feature "$impl" priority && continue
					magpie_flags=("-$stop" "$PRIO_N")
					[[ $order == rank ]] && magpie_flags+=(-prioritize)
					crawl priority "${PRIO_HOSTS}h×${PRIO_PAGES}p P=$PRIO_P N=$PRIO_N stop=$stop order=$order" 0 "$run" "$impl" \
						-p "$PRIO_P" -hosts "${bases// /,}"
				done
			done
		done
	done
	crawl_extra="" magpie_flags=()
}

# ip_scenario — see the header.
ip_scenario() {
	start_site -hosts "$IP_HOSTS" -pages "$IP_PAGES" -size 4 -links 10 -addr-gap "${IP_DELAY_MS}ms"
	local run impl pol
	for run in $(seq "$RUNS"); do
		for impl in $(i20_impls "$IP_IMPLS"); do
			# A tree without PolitenessBy is polite per host (its table
			# row says so).
			pol=ip magpie_flags=(-politeness ip)
			has_feature "$impl" politeness || pol="" magpie_flags=()
			crawl_extra="\"politeness\":\"$pol\","
			crawl ip "${IP_HOSTS} ports of 127.0.0.1 × ${IP_PAGES}p delay=${IP_DELAY_MS}ms hostpar=1 P=$IP_P" 0 "$run" "$impl" \
				-p "$IP_P" -host-par 1 -delay "${IP_DELAY_MS}ms" -hosts "${bases// /,}"
		done
	done
	crawl_extra="" magpie_flags=()
}

# The queue-on-Redis crawlers need a Redis server in every scenario.
redis_addr=""
# scenario_impls SCENARIO LIST — LIST when SCENARIO is to run.
scenario_impls() { [[ " $SCENARIOS " == *" $1 "* ]] && echo "$2" || true; }
if [[ " $IMPLS " == *" magpie-queue-redis"* || " $IMPLS " == *" magpie-queue-add-redis"* ]] ||
	[[ " $SCENARIOS " == *" issue20 "* && " $(i20_impls "$I20_IMPLS $I20_RSS_IMPLS") " == *-redis* ]] ||
	[[ " $(scenario_impls broad "$BROAD_IMPLS") $(scenario_impls priority "$PRIO_IMPLS") $(scenario_impls ip "$IP_IMPLS") " == *-redis* ]]; then
	start_redis
fi
magpie_flags=()

for sc in $SCENARIOS; do
	case $sc in
	throughput)
		for lat in ${TP_LATENCIES:-0ms 5ms}; do
			for p in $TP_PS; do
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
	storage)
		[[ $MAGPIE == 1 ]] || { echo "the storage scenario needs MAGPIE=1" >&2; exit 2; }
		storage_scenario
		;;
	cluster)
		[[ $MAGPIE == 1 ]] || { echo "the cluster scenario needs MAGPIE=1" >&2; exit 2; }
		cluster_scenario
		;;
	issue20)
		issue20_scenario
		;;
	broad)
		# Each host its own loopback address (one port), robots.txt on
		# each, 200 ms between a host's request starts, 64 workers: the
		# ideal is hosts / 200 ms, as long as 64 workers keep up.
		for hosts in $BROAD_HOSTS; do
			# HOSTS:PAGES sets the pages per host of that size.
			pages=$BROAD_PAGES
			[[ $hosts == *:* ]] && { pages=${hosts#*:}; hosts=${hosts%%:*}; }
			broad_nofile "$hosts" || continue
			start_site -hosts "$hosts" -loopback -one-listener -robots -pages "$pages" -size 16 -links 10
			printf '%s\n' $bases | tr '\n' ',' >"$bin/broad-hosts"
			# The ideal with links (cmd/site/ideal.go), robots.txt a turn and free.
			ideal_flags=(-hosts "$hosts" -robots -pages "$pages" -size 16 -links 10 -ideal "${BROAD_DELAY_MS}ms")
			crawl_extra="\"ideal_links\":$("$bin/site" "${ideal_flags[@]}"),\"ideal_links_free\":$("$bin/site" "${ideal_flags[@]}" -ideal-robots-free),"
			magpie_flags=(-sample "$BROAD_SAMPLE")
			for run in $(seq "$RUNS"); do
				for impl in $BROAD_IMPLS; do
					[[ " $all_impls " == *" $impl "* ]] || continue
					crawl broad "${hosts}h×${pages}p delay=${BROAD_DELAY_MS}ms hostpar=1 P=64" "$((hosts * 1000 / BROAD_DELAY_MS))" "$run" "$impl" \
						-p 64 -host-par 1 -delay "${BROAD_DELAY_MS}ms" -robots -hosts "@$bin/broad-hosts"
				done
			done
			crawl_extra="" magpie_flags=()
		done
		;;
	priority)
		[[ $MAGPIE == 1 ]] || { echo "the priority scenario needs MAGPIE=1" >&2; exit 2; }
		priority_scenario
		;;
	ip)
		[[ $MAGPIE == 1 ]] || { echo "the ip scenario needs MAGPIE=1" >&2; exit 2; }
		ip_scenario
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
machine="$(nproc) cores (${cpu:-unknown CPU}), ${mem_gb} GB RAM, $(go version | cut -d' ' -f3-)"
main_jsonl=$bin/main.jsonl
storage_jsonl=$bin/storage.jsonl
cluster_jsonl=$bin/cluster.jsonl
i20_jsonl=$bin/issue20.jsonl
grep -v -e '"scenario":"storage"' -e '"scenario":"cluster"' -e '"scenario":"issue20' "$JSONL" >"$main_jsonl" || true
grep '"scenario":"issue20' "$JSONL" >"$i20_jsonl" || true
grep '"scenario":"storage"' "$JSONL" >"$storage_jsonl" || true
grep '"scenario":"cluster"' "$JSONL" >"$cluster_jsonl" || true

# The storage section of $OUT: kept as it is unless this run has one.
old_storage=$bin/old-storage.md
: >"$old_storage"
[[ -f $OUT ]] && awk '/^## / {s = /^## Storage/} s' "$OUT" >"$old_storage"
# Other "## " sections (results written by hand for one issue, with the
# command that produced them) are kept as they are, after the rest.
kept=$bin/kept.md
: >"$kept"
# The issue 20 section is left out when this run writes a new one.
i20_title="## Issue 20: Colly's queue idiom"
new_i20=0
[[ -s $i20_jsonl ]] && new_i20=1
[[ -f $OUT ]] && awk -v drop="$new_i20" -v t="$i20_title" \
	'/^## / {k = !/^## Storage/ && !/^## Redis Cluster/ && !(drop && $0 == t)} k' "$OUT" >"$kept"
# The Redis Cluster section: kept as it is unless this run has one.
cluster_md=$bin/old-cluster.md
: >"$cluster_md"
[[ -f $OUT ]] && awk '/^## / {s = /^## Redis Cluster/} s' "$OUT" >"$cluster_md"

main_md=$bin/main.md
if [[ -s $main_jsonl ]]; then
	{
		echo "# magpie bench results"
		echo
		echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "- machine: $machine"
		echo "- mode: $([[ $QUICK == 1 ]] && echo "QUICK (small sizes)" || echo full), runs per cell: $RUNS (memory: $MEM_RUNS), medians shown"
		echo "- command: \`QUICK=$QUICK RUNS=$RUNS SCENARIOS=\"$(echo ${SCENARIOS//storage/})\" IMPLS=\"$(echo $IMPLS)\" bench/run.sh\`"
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
		echo "magpie-async also sets Workers(P) in every scenario, which fixes its download pool at P; magpie-async-ported does not (a Colly program with its import path changed: the pool follows the LimitRule)."
		echo "In the politeness and rate tables pages/s above the ideal means the limit was broken, so a"
		echo "magpie/Colly pages/s ratio below 1 there is Colly going too fast, not magpie being slow."
		echo
		"$bin/report" <"$main_jsonl"
	} >"$main_md"
elif [[ -f $OUT ]]; then
	awk '/^## / {exit} {print}' "$OUT" >"$main_md"
else
	echo "# magpie bench results" >"$main_md"
	echo >>"$main_md"
fi

storage_md=$old_storage
if [[ -s $storage_jsonl ]]; then
	storage_md=$bin/storage.md
	{
		echo "## Storage"
		echo
		echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "- machine: $machine"
		echo "- mode: $([[ $QUICK == 1 ]] && echo "QUICK (small sizes)" || echo full), runs: frontier $MEM_RUNS, Redis processes $RUNS (medians shown)"
		echo "- command: \`QUICK=$QUICK RUNS=$RUNS MEM_RUNS=$MEM_RUNS FRONTIER=$FRONTIER REDIS_PAGES=$REDIS_PAGES REDIS_P=\"$REDIS_P\" SCENARIOS=storage bench/run.sh\`"
		[[ -n $NOTE ]] && echo "- note: $NOTE"
		echo
		echo "Frontier rows (magpie-frontier-*): the site (\`site -frontier N -hub-links N/200\`) serves \"/\" linking"
		echo "to 210 hub pages of $((FRONTIER / 200)) links each, $((FRONTIER + FRONTIER / 20)) distinct leaf URLs in all; the crawl runs"
		echo "\`queue.New(8, store)\` (sqlite: \`sqlitestore.Open\` as queue and \`SetStorage\`; mem: an unlimited"
		echo "\`InMemoryQueueStorage\` and the default visited set), reads the queue's \`Len\` every 500 ms and stops"
		echo "once it holds $FRONTIER requests. frontier reached = the largest \`Len\` seen; peak RSS = Getrusage"
		echo "Maxrss of the crawl process; pages = pages fetched meanwhile (hubs and some leaves)."
		echo
		echo "Redis rows (magpie-redis): one Redis (\`--save ''\`), a parent seeds the queue and starts procs"
		echo "worker processes, each \`queue.New(P, redisstore)\` + \`SetStorage(redisstore)\`, no politeness"
		echo "limit; wall s runs from the first start to the last exit; CPU s includes the workers; peak RSS is"
		echo "the parent's only. Ideal pages/s = procs × P ÷ 50 ms."
		echo
		if [[ -s $bin/redis-mem.txt ]]; then
			echo "Redis visited set, 1,000,000 random IDs (\`MAGPIE_REDIS_MEMTEST=1 go test -run VisitedMemory -v ./storage/redisstore/\`):"
			echo
			sed 's/^/    /' "$bin/redis-mem.txt"
			echo
		fi
		"$bin/report" <"$storage_jsonl"
	} >"$storage_md"
fi
if [[ -s $cluster_jsonl ]]; then
	cluster_md=$bin/cluster.md
	{
		echo "## Redis Cluster"
		echo
		echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo "- machine: $machine"
		echo "- mode: $([[ $QUICK == 1 ]] && echo "QUICK (small sizes)" || echo full), runs per cell: $RUNS (medians shown)"
		echo "- command: \`QUICK=$QUICK RUNS=$RUNS CL_HOSTS=$CL_HOSTS CL_PAGES=$CL_PAGES CL_P=$CL_P OPS_FOR=$OPS_FOR SCENARIOS=cluster bench/run.sh\`"
		[[ -n $NOTE ]] && echo "- note: $NOTE"
		echo
		echo "node = one redis-server (\`--save ''\`); cluster = 3 masters with one replica each (6 redis-servers,"
		echo "\`redis-cli --cluster create --cluster-replicas 1\`), all on this machine, the frontier in 3 partitions (the"
		echo "default: one per master), pushes and acknowledgements waiting for the replica. Crawl rows (magpie-redis):"
		echo "a parent seeds the queue and starts procs worker processes, each \`queue.New(P, redisstore)\` +"
		echo "\`SetStorage(redisstore)\`; ideal pages/s = procs × P ÷ 50 ms. Queue rows (magpie-redis-ops): procs worker"
		echo "processes of 4 goroutines each loop over Push(10 entries for 20 hosts), Lease(10), Ack; \"pages\" are the"
		echo "queue operations (calls) completed and pages/s is queue operations per second."
		echo
		if [[ -s $bin/cluster-mem.txt ]]; then
			echo "Memory on the cluster (\`MAGPIE_REDIS_MEMTEST=1 go test -run ClusterVisitedMemory -v ./storage/redisstore/\`):"
			echo
			sed 's/^/    /' "$bin/cluster-mem.txt"
			echo
		fi
		"$bin/report" <"$cluster_jsonl"
	} >"$cluster_md"
fi
i20_md=$bin/issue20.md
: >"$i20_md"
if [[ $new_i20 == 1 ]]; then
	load=$({ sort -n "$bin/i20-load" 2>/dev/null || true; } | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) printf "%s–%s", lo, hi}')
	{
		echo "$i20_title"
		echo
		echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); the scenario took ${i20_wall:-?} s"
		echo "- machine: $machine"
		echo "- load: the machine was shared (other sessions ran builds and tests); 1-minute load average at the crawls' starts: ${load:-unknown}"
		echo "- mode: $([[ $QUICK == 1 ]] && echo "QUICK (small sizes)" || echo full), rounds: $RUNS (the ${I20_RSS_PAGES}-page crawl: $MEM_RUNS), medians shown"
		echo "- command: \`${OLD_REF:+OLD_REF=$OLD_REF }QUICK=$QUICK RUNS=$RUNS MEM_RUNS=$MEM_RUNS I20_PAGES=$I20_PAGES I20_RSS_PAGES=$I20_RSS_PAGES I20_P=$I20_P SCENARIOS=issue20 bench/run.sh\`"
		[[ -n $OLD_REF ]] && echo "- old: magpie at \`$OLD_REF\` ($(git -C "$here/.." rev-parse --short "$OLD_REF" 2>/dev/null || echo ?)), new: this tree at $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo ?)$([[ -n $(git -C "$here/.." status --porcelain 2>/dev/null) ]] && echo " with uncommitted changes")"
		[[ -n $NOTE ]] && echo "- note: $NOTE"
		echo
		echo "One site (\`site -pages N -size 16 -links 10\`, 0 ms latency) per table, every crawler in turn with -p $I20_P"
		echo "(queue threads, or the async collector's \`Workers\` and LimitRule Parallelism). \`magpie-queue-add*\` and"
		echo "\`colly-queue-add\` are the queue crawl as Colly programs write it: \`q.AddURL(e.Request.AbsoluteURL(href))\`"
		echo "from \`OnHTML\`, nothing filtered first; \`magpie-queue*\` hand links to \`e.Request.Visit\`; \`colly-queue\`"
		echo "filters with \`HasVisited\` before \`AddURL\`; \`*-stream\` are the same crawlers with \`StreamHTML()\`. allocs/page = \`runtime.MemStats.Mallocs\` of the crawl process"
		echo "around the crawl ÷ pages. CPU s and peak RSS are the crawl process's (\`getrusage\`)."
		echo
		"$bin/report" <"$i20_jsonl"
	} >"$i20_md"
fi
cp "$main_md" "$OUT.tmp"
# append_section FILE — appends FILE to $OUT.tmp, one blank line between
# the sections however the last one ended (a section kept from $OUT ends
# with its own blank line, a generated one may not).
append_section() {
	[[ -s $1 ]] || return 0
	[[ -z $(tail -c1 "$OUT.tmp") ]] || echo >>"$OUT.tmp"
	[[ -z $(tail -n1 "$OUT.tmp") ]] || echo >>"$OUT.tmp"
	cat "$1" >>"$OUT.tmp"
}
append_section "$storage_md"
append_section "$cluster_md"
append_section "$kept"
append_section "$i20_md"
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT" >&2
