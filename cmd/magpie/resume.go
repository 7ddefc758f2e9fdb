package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/magpiecrawl/magpie/queue"
)

// errFinished is returned by a --state crawl whose state file holds a
// finished crawl of the same start URLs: nothing is left to fetch.
var errFinished = errors.New("the crawl is finished")

// stateFinished reports whether a --state run has nothing to do: every
// start URL was crawled by an earlier run and its queue is empty.
func stateFinished(q *queue.Queue, st *starts) (bool, error) {
	st.mu.Lock()
	all := len(st.done) >= len(st.order)
	st.mu.Unlock()
	if !all {
		return false, nil
	}
	n, err := q.Size()
	if err != nil {
		return false, fmt.Errorf("--state: %w", err)
	}
	return n == 0, nil
}

// outputModeFor is how this run meets earlier runs' output: a --state
// file that exists is a crawl to resume, whose output grows and takes up
// what a killed run left; --resume-output takes that up on any run.
func (f *crawlFlags) outputModeFor() outputMode {
	mode := outputMode{adopt: f.resumeOutput}
	if f.state != "" {
		if _, err := os.Stat(f.state); err == nil {
			mode.appendItems, mode.adopt = true, true
		}
	}
	return mode
}

// sayFinished tells that a --state crawl run again had nothing to do.
func sayFinished(w io.Writer, state string) {
	fmt.Fprintf(w, "the crawl in %s is finished: every start URL was crawled, nothing is queued and no page is due for a revisit (--revisit-after); nothing was fetched or written (--revisit-after 0 revisits every page now, conditionally; remove %s, or give another --state file, to crawl anew)\n", state, state)
}

// stateFileName is the state file's name inside a --state directory.
const stateFileName = "state.db"

// statePath is the state file --state names: the path as given, or
// stateFileName inside it when it is a directory (one that exists, or a
// path ending in a slash, as Scrapy's JOBDIR is). mkdir is the directory to
// create before the file when it does not exist yet.
func statePath(state string) (file, mkdir string) {
	if state == "" {
		return "", ""
	}
	if strings.HasSuffix(state, "/") || strings.HasSuffix(state, string(filepath.Separator)) {
		return filepath.Join(state, stateFileName), state
	}
	if st, err := os.Stat(state); err == nil && st.IsDir() {
		return filepath.Join(state, stateFileName), ""
	}
	return state, ""
}
