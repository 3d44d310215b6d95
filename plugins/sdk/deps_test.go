package sdk_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A plugin binary links the contract (core), the protocol and this SDK:
// not the host package, the trainer's config loading (koanf, yaml) or its
// logger (zerolog), nor the tasks package and its dataset readers (parquet
// and its codecs): the answer helpers a plugin needs are in the leaf
// package tasks/answer.
func TestPluginBinaryLinksNoHost(t *testing.T) {
	for _, pkg := range []string{
		"github.com/cde-rl/cde/plugins/examples/answercount/cmd/answercount",
		"github.com/cde-rl/cde/plugins/internal/testplugin",
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 20 {
			t.Fatalf("go list -deps %s listed %d packages: %q", pkg, len(deps), deps)
		}
		for _, d := range deps {
			if d == "github.com/cde-rl/cde/plugins" || d == "github.com/cde-rl/cde/trainer" || d == "github.com/cde-rl/cde/tasks" ||
				strings.Contains(d, "koanf") || strings.Contains(d, "yaml") || strings.Contains(d, "zerolog") ||
				strings.Contains(d, "parquet") || strings.Contains(d, "brotli") || strings.Contains(d, "lz4") {
				t.Errorf("%s links %s", pkg, d)
			}
		}
		if !strings.Contains(string(out), "github.com/cde-rl/cde/plugins/internal/wire\n") {
			t.Errorf("%s does not link the protocol package: %q", pkg, deps)
		}
	}
}
