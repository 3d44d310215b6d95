package plugins

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// go-plugin's own "plugin process exited" line carries a "plugin" field
// (the binary's path); the bridged line has one "plugin" key, the
// strategy's label, and keeps the path under another name.
func TestLogBridgeOnePluginKey(t *testing.T) {
	var buf bytes.Buffer
	w := &zerologWriter{log: zerolog.New(&buf), plugin: "answercount"}
	w.Write([]byte(`{"@level":"info","@message":"plugin process exited","@module":"plugin","plugin":"/bin/answercount","id":42}` + "\n"))
	line := strings.TrimSpace(buf.String())
	if n := strings.Count(line, `"plugin":`); n != 1 {
		t.Fatalf("%d \"plugin\" keys in %s", n, line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	if m["plugin"] != "answercount" || m["go_plugin_plugin"] != "/bin/answercount" || m["message"] != "plugin process exited" {
		t.Errorf("bridged line %s", line)
	}
}
