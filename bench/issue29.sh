#!/usr/bin/env bash
# issue29.sh — issue 29's goals for allocations and CPU per page, old beside
# new in one run: run.sh's issue20 scenario once per parallelism of $I29_PS
# (default "64 8") with the crawlers of $I29_IMPLS (default: raw,
# colly-async, magpie-async, magpie-async-stream, magpie-queue-add; each
# magpie-* one with its IMPL@old from $OLD_REF, default 9a4f221, built with
# its StreamHTML crawlers but not the ReuseBody ones: OLD_TAGS magpie_noreuse
# unless set), $RUNS
# rounds (default 3). The long RSS crawl of that scenario is cut to the raw
# crawler on 1,000 pages. Each parallelism's tables go to $OUT_DIR/pP.md
# (default: a new temporary directory, printed), its crawls to pP.jsonl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
for p in ${I29_PS:-64 8}; do
	OUT=$out/p$p.md JSONL=$out/p$p.jsonl OLD_REF=${OLD_REF:-9a4f221} OLD_TAGS=${OLD_TAGS-magpie_noreuse} RUNS=${RUNS:-3} \
		SCENARIOS=issue20 I20_P=$p I20_PAGES=${I29_PAGES:-20000} \
		I20_IMPLS="${I29_IMPLS:-raw colly-async magpie-async magpie-async-stream magpie-queue-add}" \
		I20_RSS_IMPLS=raw I20_RSS_PAGES=1000 MEM_RUNS=1 "$here/run.sh"
done
echo "issue29: tables in $out" >&2
