//go:build !linux

package magpie_test

import "os/exec"

// dieWithTest does nothing where the system cannot tie a child's life to
// its parent's; t.Cleanup still stops the child.
func dieWithTest(cmd *exec.Cmd) {}
