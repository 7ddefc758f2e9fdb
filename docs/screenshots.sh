#!/bin/sh
# Regenerates docs/dashboard-1280.png and docs/dashboard-390.png: the live
# page (package dashboard) at 1280 and 390 px wide, taken by the browser
# test of the render module during its crawl of a local site (a slow host,
# a 429 host, a broken link). Needs chromium on PATH.
set -eu
cd "$(dirname "$0")/.."
MAGPIE_SCREENSHOTS="$PWD/docs" MAGPIE_REQUIRE_CHROMIUM=1 \
	go test -count=1 -run '^TestDashboardInBrowser$' ./render
ls -l docs/dashboard-1280.png docs/dashboard-390.png
