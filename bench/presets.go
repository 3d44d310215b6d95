package bench

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// presetFiles are the bench presets shipped in this directory, embedded so
// `cde-run bench -c smoke` works from any directory.
//
//go:embed *.yaml
var presetFiles embed.FS

// Presets lists the shipped presets' names (smoke, paper-countdown, ...).
func Presets() []string {
	entries, _ := presetFiles.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return names
}

// preset returns the shipped preset a -c argument names when no file of
// that path exists: "smoke", "smoke.yaml" or "bench/smoke.yaml".
func preset(path string) ([]byte, string, bool) {
	stem := strings.TrimSuffix(filepath.Base(path), ".yaml")
	b, err := presetFiles.ReadFile(stem + ".yaml")
	if err != nil {
		return nil, "", false
	}
	return b, filepath.Join("bench", stem+".yaml"), true
}

// notFound is Load's error for a path that is neither a file nor a preset.
func notFound(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("bench: %s: no such file, and no shipped preset of that name (presets: %s)", path, strings.Join(Presets(), ", "))
	}
	return fmt.Errorf("bench: %w", err)
}

// LoadPreset parses the shipped preset name ("smoke", "smoke.yaml" or
// "bench/smoke.yaml") and reads no file: cde-run board takes a bench's
// arms, seeds and claims from the preset its commands.txt names.
func LoadPreset(name string) (*Spec, error) {
	b, file, ok := preset(name)
	if !ok {
		return nil, notFound(name, fs.ErrNotExist)
	}
	return ParseSpec(b, file)
}
