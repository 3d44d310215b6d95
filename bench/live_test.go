package bench

import (
	"os"
	"strings"
	"testing"
)

// LoadPreset takes the embedded preset even where a file of that name
// exists (cde-run board reads no file a commands.txt names), and refuses
// a name that is no preset.
func TestLoadPresetReadsNoFile(t *testing.T) {
	t.Chdir(t.TempDir())
	os.WriteFile("smoke.yaml", []byte("base: {}\nseeds: [7]\narms: [{name: mine, config: {}}]\n"), 0o644)
	spec, err := LoadPreset("smoke.yaml")
	if err != nil || spec.Stem != "smoke" || len(spec.Arms) != 4 || spec.Arms[0].Name != "grpo_simhash" {
		t.Fatalf("LoadPreset(smoke.yaml): %v %+v", err, spec)
	}
	if file, err := Load("smoke.yaml"); err != nil || file.Arms[0].Name != "mine" {
		t.Fatalf("Load reads the file: %v %+v", err, file)
	}
	if _, err := LoadPreset("no-such-preset"); err == nil || !strings.Contains(err.Error(), "no shipped preset") {
		t.Errorf("an unknown preset: %v", err)
	}
}
