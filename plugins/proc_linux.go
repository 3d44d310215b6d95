package plugins

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill the plugin if the host dies without
// closing it (kill -9 of cde-run): no orphans even then.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
