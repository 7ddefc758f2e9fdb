package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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
