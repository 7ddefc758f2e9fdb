#!/usr/bin/env bash
# Redis for the tests, on loopback ports: one server (MAGPIE_REDIS_ADDR) and a Redis Cluster of 3 masters and 3
# replicas (MAGPIE_REDIS_CLUSTER_ADDRS, for the redisstore tests named *Cluster*). .ci/run sources it:
#
#   redis_single_start; redis_cluster_start   ...   redis_cluster_stop; redis_single_stop
#
# Run on its own, it starts both, runs a command with the two variables set (by default it prints them), and
# stops them:
#
#   bash .ci/redis.sh go test -race -run Cluster ./storage/redisstore
#
# Ports are drawn outside the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, read when
# drawing), for a node's cluster bus port (its port + 10000) too: a port in that range can be taken at any
# moment by an outgoing connection, and a node then fails to bind. A node that does not start anyway (a port
# taken between the draw and the bind) is started again on another port.

# What the start functions set; the stop functions work on them, whatever the start did.
REDIS_DIR=${REDIS_DIR:-}
REDIS_CLUSTER_DIR=${REDIS_CLUSTER_DIR:-}
REDIS_PORTS=()
REDIS_CLUSTER_PORTS=()

# redis_ephemeral_range prints the first and last port of the kernel's ephemeral range (Linux's default
# where the file cannot be read; REDIS_EPHEMERAL_RANGE_FILE names another file, for .ci/redis-test).
redis_ephemeral_range() {
  local lo hi
  if read -r lo hi 2>/dev/null <"${REDIS_EPHEMERAL_RANGE_FILE:-/proc/sys/net/ipv4/ip_local_port_range}" \
    && [ -n "$hi" ]; then
    echo "$lo $hi"
  else
    echo "32768 60999"
  fi
}

# redis_pick_port BUS [TAKEN...]: prints a loopback port nothing listens on, outside the ephemeral range and
# not among TAKEN; with BUS=1 its port + 10000 meets the same conditions.
redis_pick_port() {
  local bus=$1; shift
  local lo hi p q top tries
  read -r lo hi < <(redis_ephemeral_range)
  top=65535
  [ "$bus" = 1 ] && top=$((65535 - 10000))
  for ((tries = 0; tries < 2000; tries++)); do
    p=$((10000 + ((RANDOM << 15) | RANDOM) % (top - 10000 + 1)))
    [[ " $* " == *" $p "* ]] && continue
    for q in "$p" $([ "$bus" = 1 ] && echo $((p + 10000))); do
      if ((q >= lo && q <= hi)) || (exec 3<>"/dev/tcp/127.0.0.1/$q") 2>/dev/null; then
        continue 2
      fi
    done
    echo "$p"
    return 0
  done
  echo "redis: no free port outside the ephemeral range $lo-$hi" >&2
  return 1
}

# redis_start_node PORT DIR [ARGS...]: starts redis-server on PORT with its files in DIR; fails, leaving nothing
# running, unless that very server (its pid) answers within 5 s.
redis_start_node() {
  local p=$1 dir=$2 pid=""
  shift 2
  redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no --daemonize yes --dir "$dir" \
    --pidfile "$dir/$p.pid" --logfile "$dir/$p.log" "$@" || return 1
  for _ in $(seq 1 50); do
    [ -s "$dir/$p.pid" ] && pid=$(cat "$dir/$p.pid")
    if [ -n "$pid" ] && redis-cli -h 127.0.0.1 -p "$p" info server 2>/dev/null | grep -q "^process_id:$pid"; then
      return 0
    fi
    sleep 0.1
  done
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  return 1
}

# redis_start_retrying BUS DIR VAR [ARGS...]: redis_start_node on a drawn port, up to 5 ports; appends the port
# started to the array VAR. ARGS may contain {port}, replaced by the port.
redis_start_retrying() {
  local bus=$1 dir=$2
  local -n started=$3
  shift 3
  local p attempt tried=() args
  for attempt in 1 2 3 4 5; do
    p=$(redis_pick_port "$bus" "${started[@]}" "${tried[@]}") || return 1
    args=("${@//\{port\}/$p}")
    if redis_start_node "$p" "$dir" "${args[@]}"; then
      started+=("$p")
      return 0
    fi
    echo "redis: the node on port $p did not start (attempt $attempt of 5): $(tail -n 2 "$dir/$p.log" 2>/dev/null)" >&2
    tried+=("$p")
  done
  return 1
}

# redis_stop_dir DIR PORT...: shuts the servers down and removes DIR; a server that does not shut down is killed.
redis_stop_dir() {
  local dir=$1 p f
  shift
  for p in "$@"; do
    redis-cli -h 127.0.0.1 -p "$p" shutdown nosave >/dev/null 2>&1 || true
  done
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    for f in "$dir"/*.pid; do
      [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    rm -rf "$dir"
  fi
}

# redis_single_start starts one server and exports MAGPIE_REDIS_ADDR.
redis_single_start() {
  REDIS_DIR=$(mktemp -d)
  REDIS_PORTS=()
  redis_start_retrying 0 "$REDIS_DIR" REDIS_PORTS || return 1
  export MAGPIE_REDIS_ADDR="127.0.0.1:${REDIS_PORTS[0]}"
}

redis_single_stop() { redis_stop_dir "${REDIS_DIR:-}" "${REDIS_PORTS[@]}"; }

# redis_cluster_start starts 6 nodes, makes them a cluster of 3 masters with a replica each, waits until it
# serves, and exports MAGPIE_REDIS_CLUSTER_ADDRS.
redis_cluster_start() {
  REDIS_CLUSTER_DIR=$(mktemp -d)
  REDIS_CLUSTER_PORTS=()
  local addrs=() p
  while [ ${#REDIS_CLUSTER_PORTS[@]} -lt 6 ]; do
    redis_start_retrying 1 "$REDIS_CLUSTER_DIR" REDIS_CLUSTER_PORTS --cluster-enabled yes \
      --cluster-config-file "$REDIS_CLUSTER_DIR/nodes-{port}.conf" --cluster-node-timeout 2000 || return 1
  done
  for p in "${REDIS_CLUSTER_PORTS[@]}"; do
    addrs+=("127.0.0.1:$p")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$REDIS_CLUSTER_DIR/create.log" 2>&1 \
    || { cat "$REDIS_CLUSTER_DIR/create.log" >&2; return 1; }
  for _ in $(seq 1 100); do
    redis-cli -h 127.0.0.1 -p "${REDIS_CLUSTER_PORTS[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
    sleep 0.1
  done
  redis-cli -h 127.0.0.1 -p "${REDIS_CLUSTER_PORTS[0]}" cluster info | grep -q 'cluster_state:ok' \
    || { echo "redis: the cluster on ${addrs[*]} is not ok" >&2; return 1; }
  MAGPIE_REDIS_CLUSTER_ADDRS=$(IFS=,; echo "${addrs[*]}")
  export MAGPIE_REDIS_CLUSTER_ADDRS
}

redis_cluster_stop() { redis_stop_dir "${REDIS_CLUSTER_DIR:-}" "${REDIS_CLUSTER_PORTS[@]}"; }

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  trap 'redis_cluster_stop; redis_single_stop' EXIT
  redis_single_start
  redis_cluster_start
  echo "MAGPIE_REDIS_ADDR=$MAGPIE_REDIS_ADDR"
  echo "MAGPIE_REDIS_CLUSTER_ADDRS=$MAGPIE_REDIS_CLUSTER_ADDRS"
  if [ $# -gt 0 ]; then "$@"; fi
fi
