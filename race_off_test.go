//go:build !race

package magpie

import "testing"

// raceOn: see race_on_test.go.
const raceOn = false

// allocsCounted: see race_on_test.go.
func allocsCounted(*testing.T) bool { return true }
