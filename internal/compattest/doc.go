// Package compattest is a Colly program moved to magpie, in a module of its
// own that is not in the repository's go.work: it imports magpie next to
// chromedp v0.11 (far older than the v0.23 magpie's render module uses) and
// hands queue.New a storage with Colly's queue interface, as programs using
// gocolly/redisstorage or colly-sqlite3-storage do. It proves that importing
// magpie forces neither the render module's chromedp nor a change of queue
// storage on a program. .ci/run builds and tests it with GOWORK=off; it has
// no code a user imports.
package compattest
