//go:build !linux

package bench

import "os/exec"

// runChild runs cmd. Only Linux has a parent-death signal; elsewhere a
// bench killed with SIGKILL leaves its running trainer to finish or be
// stopped by hand.
func runChild(cmd *exec.Cmd) error { return cmd.Run() }
