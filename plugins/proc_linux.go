package plugins

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"unsafe"
)

// setProcAttrs starts the plugin as the leader of its own process group,
// so that killGroup reaches every process a wrapper script starts, and
// makes the kernel kill it if the host dies without closing it (kill -9 of
// cde-run; Pdeathsig reaches the plugin process itself, not its children:
// watchGroup ends those).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// watchGroup starts the group's watchdog, so that the children of a
// plugin die with the host even when nothing in the host runs (kill -9):
// a shell in the plugin's process group pgid, waiting on a pipe whose
// only write end the host holds (close-on-exec, so no other process
// inherits it). When the host dies, or closes the returned end, the read
// ends and the shell kills its whole group, itself included. While it
// lives the group id cannot be reused, so the kill reaches only the
// plugin's group; killGroup ends the watchdog with the rest of the group.
func watchGroup(pgid int) (io.Closer, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close() // the watchdog holds the read end
	cmd := exec.Command("/bin/sh", "-c", "read -r _; kill -9 0")
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	go cmd.Wait() // reaped when killed with the group
	return w, nil
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
