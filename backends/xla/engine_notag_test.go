//go:build !xla

package xla

import (
	"strings"
	"testing"
)

// Without -tags xla, the xla:* engines fail, saying how to get them, and
// auto is cde's cpu engine.
func TestXLAEnginesNeedTheTag(t *testing.T) {
	for _, engine := range []string{"xla:cpu", "xla:cuda", "xla:tpu"} {
		_, err := NewEngine(engine, "/nonexistent/pjrt_c_api_cpu_plugin.so")
		if err == nil {
			t.Fatalf("%s: no error", engine)
		}
		for _, want := range []string{`backend.engine "` + engine + `"`, "go build -tags xla ./cmd/cde-run"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", engine, err, want)
			}
		}
	}
	b, err := NewEngine("auto", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if b.Name() != "cpu" {
		t.Fatalf("auto = %s, want cpu", b.Name())
	}
}
