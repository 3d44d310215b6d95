//go:build !linux

package plugins

import "os/exec"

// setProcAttrs: outside Linux the plugin runs in the host's process group
// and without Pdeathsig; it is killed by Close (normal exit, errors and
// Ctrl-C all close it), its children are not.
func setProcAttrs(cmd *exec.Cmd) {}

// killGroup: no process group of its own outside Linux (see setProcAttrs).
func killGroup(pid int) {}

// waitExited returns at once: the runner's cmd.Wait does the waiting.
func waitExited(pid int) {}
