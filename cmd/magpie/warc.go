package main

import (
	"fmt"
	"strconv"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// warcUsage is the help of --warc.
const warcUsage = "also write every exchange (pages, redirects, errors, robots.txt) to WARC files in `DIR`, gzipped, with a CDXJ index beside each; an earlier run's open file is recovered and a new one started"

// startWARC opens the WARC writer --warc asks for and has the crawl's
// collector archive into it. finish closes the writer (its last file and
// index) once the crawl is over and reports what went wrong while writing.
func (f *crawlFlags) startWARC(cfg *crawlConfig) (finish func() error, err error) {
	if f.warc == "" {
		return func() error { return nil }, nil
	}
	w, err := warc.New(f.warc, warc.Prefix("magpie"), warc.Software("magpie "+version()),
		warc.Info("robots", map[bool]string{true: "ignore", false: "obey"}[f.ignoreRobots]),
		warc.Info("depth", strconv.Itoa(f.depth)), warc.Info("scope", f.scope))
	if err != nil {
		return nil, fmt.Errorf("--warc: %w", err)
	}
	prev := cfg.onStart
	cfg.onStart = func(c *magpie.Collector) error {
		magpie.WithArchiver(w)(c)
		if prev != nil {
			return prev(c)
		}
		return nil
	}
	return func() error {
		if err := w.Close(); err != nil {
			return fmt.Errorf("--warc: %w", err)
		}
		return nil
	}, nil
}
