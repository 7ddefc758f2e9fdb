//go:build !race

package magpie

// raceOn: see race_on_test.go.
const raceOn = false
