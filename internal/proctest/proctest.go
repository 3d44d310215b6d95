// Package proctest reads Linux's /proc for tests that check process trees
// (a plugin's process group, a bench's training children).
package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is one process as /proc/PID/stat gives it.
type Proc struct {
	PID, PPID, PGRP int
	State           string // "R", "S", "Z" (a zombie: exited, not reaped)...
}

// Live reports whether the process has not exited.
func (p Proc) Live() bool { return p.State != "Z" }

// All lists the processes /proc shows (none where there is no /proc).
func All() []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		if p, ok := Get(e.Name()); ok {
			out = append(out, p)
		}
	}
	return out
}

// Get reads /proc/PID/stat ("PID (COMM) STATE PPID PGRP ...": COMM may
// hold spaces and parentheses, so the fields are split after the last ')').
func Get(pid string) (Proc, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return Proc{}, false
	}
	data, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return Proc{}, false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 3 {
		return Proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return Proc{PID: n, PPID: ppid, PGRP: pgrp, State: f[0]}, true
}
