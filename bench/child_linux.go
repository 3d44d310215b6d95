package bench

import (
	"os/exec"
	"runtime"
	"syscall"
)

// runChild runs cmd so that it dies with the bench: the kernel sends it
// SIGTERM when the thread that started it exits, so a bench killed with
// SIGKILL leaves no trainer running (train stops after its current step on
// SIGTERM, as on Ctrl-C). Pdeathsig follows the starting thread, not the
// process, so that thread is held for the child's whole life.
func runChild(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	return cmd.Run()
}
