#!/usr/bin/env bash
# Installs the third-party WARC tools the warc module's tests check their files with, and exports
# where they are. Source it from .ci/run:  . .ci/warc-tools.sh
#   - warcio (Webrecorder's JavaScript WARC library and CLI) from the npm registry;
#   - replaywebpage (ReplayWeb.page's static files: index.html, ui.js, sw.js), unpacked from its npm
#     tarball without its dependencies (its bundles need none; its pinned warcio range may not be
#     served by every mirror);
#   - node and npm from Debian if missing. Chromium comes from .ci/run (the render tests).
# The cache dir (MAGPIE_WARC_TOOLS, default ~/.cache/magpie-warc-tools) is reused when it already holds
# these versions.
WARCIO_VERSION=2.4.11
REPLAYWEBPAGE_VERSION=2.5.3
MAGPIE_WARC_TOOLS="${MAGPIE_WARC_TOOLS:-$HOME/.cache/magpie-warc-tools}"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing nodejs and npm (WARC tools)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
mkdir -p "$MAGPIE_WARC_TOOLS"
if ! grep -qs "\"version\": \"$WARCIO_VERSION\"" "$MAGPIE_WARC_TOOLS/node_modules/warcio/package.json"; then
  echo "== installing warcio $WARCIO_VERSION into $MAGPIE_WARC_TOOLS"
  (cd "$MAGPIE_WARC_TOOLS" && npm install --no-audit --no-fund --no-save "warcio@$WARCIO_VERSION" >/dev/null)
fi
if ! grep -qs "\"version\": \"$REPLAYWEBPAGE_VERSION\"" "$MAGPIE_WARC_TOOLS/replaywebpage/package.json"; then
  echo "== unpacking replaywebpage $REPLAYWEBPAGE_VERSION into $MAGPIE_WARC_TOOLS/replaywebpage"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "replaywebpage@$REPLAYWEBPAGE_VERSION" >/dev/null && tar xzf replaywebpage-*.tgz)
  rm -rf "$MAGPIE_WARC_TOOLS/replaywebpage"
  mv "$tmp/package" "$MAGPIE_WARC_TOOLS/replaywebpage"
  rm -rf "$tmp"
fi
export MAGPIE_WARC_TOOLS
# The warc module's tests fail, rather than skip, without these tools.
export MAGPIE_REQUIRE_WARC_TOOLS=1
