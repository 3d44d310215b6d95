package board

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The uPlot files embedded are those of the version package-lock.json
// pins: its header names that version, and where npm ci has installed the
// package (.ci/run does), they are its bytes (board/vendor/README.md).
func TestVendoredUPlot(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("vendor", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		t.Fatal(err)
	}
	pkg := lock.Packages["node_modules/uplot"]
	if pkg.Version == "" || !strings.HasPrefix(pkg.Integrity, "sha512-") {
		t.Fatalf("package-lock.json pins no uplot: %+v", lock.Packages)
	}
	js, err := assets.ReadFile("assets/uplot/uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/*! https://github.com/leeoniya/uPlot (v" + pkg.Version + ") */"; !bytes.HasPrefix(js, []byte(want)) {
		t.Errorf("the embedded uPlot.iife.min.js starts %q, want %q", js[:min(len(js), 60)], want)
	}
	lic, err := assets.ReadFile("assets/uplot/LICENSE")
	if err != nil || !bytes.Contains(lic, []byte("MIT License")) {
		t.Errorf("uPlot's LICENSE is not embedded: %v", err)
	}
	installed := filepath.Join("vendor", "node_modules", "uplot")
	if _, err := os.Stat(installed); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (.ci/run runs npm ci in board/vendor)", installed, err)
		}
		t.Logf("%s not installed (npm ci in board/vendor): the bytes are not compared", installed)
		return
	}
	for emb, src := range map[string]string{"uPlot.iife.min.js": "dist/uPlot.iife.min.js", "uPlot.min.css": "dist/uPlot.min.css", "LICENSE": "LICENSE"} {
		a, _ := assets.ReadFile("assets/uplot/" + emb)
		b, err := os.ReadFile(filepath.Join(installed, src))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("assets/uplot/%s differs from the npm package's %s (%v): run board/vendor/update.sh", emb, src, err)
		}
	}
}
