package magpie_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes cmd's process be killed when the test process dies,
// even by a timeout's panic that skips t.Cleanup: no nginx outlives the
// test binary.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
