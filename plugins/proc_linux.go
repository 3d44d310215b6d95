package plugins

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// setProcAttrs starts the plugin as the leader of its own process group,
// so that killGroup reaches every process a wrapper script starts, and
// makes the kernel kill it if the host dies without closing it (kill -9 of
// cde-run; Pdeathsig reaches the plugin process itself, not its children).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to the process group led by pid (the plugin's
// group: setProcAttrs makes the plugin its leader).
func killGroup(pid int) {
	syscall.Kill(-pid, syscall.SIGKILL)
}

// waitExited blocks until process pid has exited without reaping it
// (waitid with WNOWAIT): while the exited leader is not reaped, its pid,
// which is also the group id, cannot be reused, so killGroup cannot reach
// an unrelated process.
func waitExited(pid int) {
	const (
		pPID    = 1         // P_PID
		wExited = 0x4       // WEXITED
		wNoWait = 0x1000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
