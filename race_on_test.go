//go:build race

package magpie

// raceOn tells tests that the race detector is on, so that the slowest
// single-goroutine checks (the HTML corpus) can take a sample instead;
// .ci/run runs them whole without it.
const raceOn = true
