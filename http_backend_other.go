//go:build !unix

package magpie

// openFileLimit returns 0: this platform has no limit on open files to
// read, so the idle pool takes its default bound (see idleConnBudget).
func openFileLimit() uint64 { return 0 }
