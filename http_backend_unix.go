//go:build unix

package magpie

import "syscall"

// openFileLimit returns the process's limit on open files (RLIMIT_NOFILE,
// the soft limit, which Go raises to the hard limit at start-up), 0 when it
// cannot be read.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return uint64(rl.Cur)
}
