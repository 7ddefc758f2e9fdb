//go:build race

package magpie

import "testing"

// raceOn tells tests that the race detector is on, so that the slowest
// single-goroutine checks (the HTML corpus) can take a sample instead;
// .ci/run runs them whole without it.
const raceOn = true

// allocsCounted reports whether allocation counts mean what a test says:
// under the race detector sync.Pool drops a share of what is put back, at
// random, so whatever a pool saves is counted anyway. The tests that bound
// a count check it only without -race; .ci/run runs them so.
func allocsCounted(t *testing.T) bool {
	t.Helper()
	t.Log("allocation count not checked under -race (sync.Pool drops items at random); .ci/run checks it without")
	return false
}
