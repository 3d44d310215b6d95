//go:build !linux

package plugins

import "os/exec"

// setProcAttrs: without Pdeathsig, the plugin is killed by Close (normal
// exit, errors and Ctrl-C all close it).
func setProcAttrs(cmd *exec.Cmd) {}
