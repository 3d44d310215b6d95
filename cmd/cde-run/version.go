package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// versionUsage is the help of `cde-run version`.
const versionUsage = `usage: cde-run version   (or: cde-run --version)

Prints the module path and version of this binary, the commit it was built
from (revision, commit time, and whether the working tree had uncommitted
changes), the Go version and the build tags: what "go version -m" reads
from the binary. A local build's version is "(devel)"; a binary built by
go run or go test, or with -buildvcs=false, has no commit stamped in it,
and says so.
`

// cmdVersion implements `cde-run version` and `cde-run --version`.
func cmdVersion(args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || a == "help" {
			fmt.Print(versionUsage)
			return 0
		}
	}
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "cde-run version: unexpected argument %q\n\n%s", args[0], versionUsage)
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	writeVersion(os.Stdout, bi, ok)
	return 0
}

// writeVersion writes what bi says of the binary; ok false is a binary
// without build information.
func writeVersion(w io.Writer, bi *debug.BuildInfo, ok bool) {
	if !ok || bi == nil {
		fmt.Fprintf(w, "cde-run (no build information in this binary)\ngo       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	path := bi.Main.Path
	if path == "" {
		path = bi.Path
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	fmt.Fprintf(w, "cde-run  %s %s\n", path, version)
	if rev := s["vcs.revision"]; rev != "" {
		line := rev
		if t := s["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
		switch s["vcs.modified"] {
		case "true":
			line += ", modified: built with uncommitted changes"
		case "false":
			line += ", clean"
		}
		fmt.Fprintf(w, "commit   %s\n", line)
	} else {
		fmt.Fprintln(w, "commit   unknown: none stamped in this binary (go run, go test, -buildvcs=false, or no git at build time)")
	}
	goos, goarch := s["GOOS"], s["GOARCH"]
	if goos == "" {
		goos, goarch = runtime.GOOS, runtime.GOARCH
	}
	gov := bi.GoVersion
	if gov == "" {
		gov = runtime.Version()
	}
	fmt.Fprintf(w, "go       %s %s/%s\n", gov, goos, goarch)
	tags := s["-tags"]
	if tags == "" {
		tags = "none (the xla:* engines need -tags xla)"
	}
	fmt.Fprintf(w, "tags     %s\n", tags)
}
