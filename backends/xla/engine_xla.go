//go:build xla

package xla

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/gomlx/compute"
	gomlxxla "github.com/gomlx/go-xla/compute/xla"
	"github.com/gomlx/go-xla/pjrt"
)

// This file exists only in a build with -tags xla: it links GoMLX's XLA
// backend (cgo; plugins are dlopened at run time, so the build needs no PJRT
// library) and sets openXLA.

func init() {
	// GoMLX reads GOMLX_NO_AUTO_INSTALL in its own init, which may run
	// before NewEngine sets it; switch auto-install off directly. It could
	// only run for a plugin given by name anyway, and openPJRT always passes
	// an absolute path.
	gomlxxla.EnableAutoInstall(false)
	openXLA = openPJRT
}

// openPJRT loads device's plugin from the place findPJRTPlugin picks and
// opens a GoMLX XLA backend on it.
func openPJRT(device, configured string) (compute.Backend, error) {
	home, _ := os.UserHomeDir()
	path, err := findPJRTPlugin(device, pjrtLookup{
		Configured: configured,
		EnvPath:    os.Getenv(pjrtPluginPathEnv),
		Standard:   standardPJRTDirs(runtime.GOOS, home, os.Getenv, "/etc/ld.so.conf"),
		GOOS:       runtime.GOOS,
	})
	if err != nil {
		return nil, err
	}
	// GoMLX reads ",option" suffixes from its config string.
	if strings.Contains(path, ",") {
		return nil, fmt.Errorf("PJRT plugin path %q contains a comma, which GoMLX's XLA backend reads as an option separator: move or link the plugin to a path without one", path)
	}
	config := path
	var options map[string]any
	if device == "cpu" {
		// GoMLX shares host memory with the CPU plugin's device buffers
		// (no copy per input) only for a plugin named "cpu"; cde passes a
		// path, so it asks for the same explicitly.
		config += ",shared_buffers"
	}
	if device == "cuda" {
		isDir := func(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }
		if flags, ok := cudaDataDirFlags(path, os.Getenv("XLA_FLAGS"), isDir); ok {
			os.Setenv("XLA_FLAGS", flags)
		}
		if options, err = cudaClientOptions(os.Getenv); err != nil {
			return nil, err
		}
		config += cudaTF32Option(os.LookupEnv)
		// Before the plugin loads: cuBLAS and XLA read these when they start.
		for k, v := range cudaFloat32Env(os.LookupEnv) {
			os.Setenv(k, v)
		}
	}
	b, err := gomlxxla.NewWithOptions(config, pjrt.NamedValuesMap(options))
	if err != nil {
		return nil, fmt.Errorf("PJRT plugin %s: %w", path, err)
	}
	return b, nil
}
