//go:build !linux

package plugins

import (
	"io"
	"os/exec"
)

// setProcAttrs: outside Linux the plugin runs in the host's process group
// and without Pdeathsig; it is killed by Close (normal exit, errors and
// Ctrl-C all close it), its children are not.
func setProcAttrs(cmd *exec.Cmd) {}

// watchGroup: no process group of its own outside Linux, so no
// watchdog to end it.
func watchGroup(pgid int) (io.Closer, error) { return nil, nil }

// killGroup: no process group of its own outside Linux (see setProcAttrs).
func killGroup(pid int) {}

// waitExited returns at once: the runner's cmd.Wait does the waiting.
func waitExited(pid int) {}
