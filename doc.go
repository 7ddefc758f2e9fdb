// Package magpie is a library for writing web crawlers with Colly's API on a
// buffer-pool scheduler: callbacks on a Collector, per-host politeness,
// robots.txt, and pluggable storage from memory to disk to Redis.
package magpie
