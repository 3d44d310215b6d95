package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Lines as a cde-run train child writes them off a terminal: zerolog JSON
// (written out here by hand) between plain progress lines.
const (
	childEval  = `{"level":"info","step":20,"avg@k":0.5013212316176471,"k":4,"pass@k":0.7185202205882353,"time":"2026-11-28T19:55:59Z","message":"eval"}`
	childDone  = `{"level":"info","final":{"val/l1/avg@2":0.25},"time":"2026-11-28T19:56:00Z","message":"done"}`
	childProg  = `train 20/200 (10%) elapsed 25s ETA 3m42s acc 0.594 reward 0.188`
	childError = `{"level":"error","error":"step 4: the policy loss is NaN: lower train.lr","time":"2026-11-28T19:56:01Z","message":"train failed"}`
)

var childLong = `{"level":"info","estimate_gb":0.37,"time":"2026-11-28T19:55:20Z","message":"memory estimate: ` + strings.Repeat("x", 400) + `"}`

// Text: a JSON log line becomes one text line (its level, message and
// fields, floats to 4 significant digits), an info line longer than
// MaxTextLine is cut, an error line is not, other lines pass unchanged;
// the last error's "error" field is kept. JSON: every line passes
// unchanged, and the error is kept as well.
func TestChildOutput(t *testing.T) {
	in := strings.Join([]string{childEval, childProg, childLong, childError, childDone}, "\n") + "\n" + "no newline at the end"
	var text bytes.Buffer
	c := newChildOutput(&text, LogText)
	for _, chunk := range []string{in[:50], in[50:300], in[300:]} { // lines split across writes
		c.Write([]byte(chunk))
	}
	c.Flush()
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), text.String())
	}
	if !strings.HasSuffix(lines[4], ` INF done final={"val/l1/avg@2":0.25}`) {
		t.Errorf("an object field: %q", lines[4])
	}
	eval := lines[0]
	for _, want := range []string{" INF eval ", "avg@k=0.5013", "k=4", "pass@k=0.7185", "step=20"} {
		if !strings.Contains(eval, want) {
			t.Errorf("eval line %q lacks %q", eval, want)
		}
	}
	if strings.Contains(eval, "{") || strings.Contains(eval, "0.5013212316176471") {
		t.Errorf("eval line %q is not text", eval)
	}
	if lines[1] != childProg || lines[5] != "no newline at the end" {
		t.Errorf("progress lines changed: %q, %q", lines[1], lines[4])
	}
	if n := len([]rune(lines[2])); n != MaxTextLine || !strings.HasSuffix(lines[2], "…") || !strings.Contains(lines[2], "INF memory estimate: xxx") {
		t.Errorf("long info line: %d runes %q", n, lines[2])
	}
	if !strings.Contains(lines[3], "ERR train failed") || !strings.Contains(lines[3], "step 4: the policy loss is NaN: lower train.lr") {
		t.Errorf("error line %q", lines[3])
	}
	if got := c.LastError(); got != "step 4: the policy loss is NaN: lower train.lr" {
		t.Errorf("last error %q", got)
	}

	var raw bytes.Buffer
	j := newChildOutput(&raw, LogJSON)
	j.Write([]byte(in))
	j.Flush()
	if raw.String() != in+"\n" {
		t.Errorf("json format changed the output:\n%s", raw.String())
	}
	if j.LastError() != "step 4: the policy loss is NaN: lower train.lr" {
		t.Errorf("json format: last error %q", j.LastError())
	}
}

// A bench whose arm-seeds fail (a stand-in cde-run that logs a JSON error
// and exits 1): each gets a readable FAILED line with the child's own
// error and the command that retries it, no JSON line in text format,
// Run returns SeedsFailedError naming both after writing the report, and
// the closing summary lists them with the exit status.
func TestFailedSeedsReadable(t *testing.T) {
	tmp := t.TempDir()
	exe := filepath.Join(tmp, "fake-cde-run")
	script := "#!/bin/sh\necho '" + childEval + "' >&2\necho '" + childProg + "'\necho '" + childError + "' >&2\nexit 1\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSpec([]byte(`
base: {task: {name: arith, levels: [1]}, model: {checkpoint: ""}, train: {steps: 2}}
seeds: [1, 2]
arms: [{name: a}]
`), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{LogText, LogJSON} {
		out := filepath.Join(tmp, format)
		var log syncBuffer
		err := Run(context.Background(), spec, Options{Dir: out, Exe: exe, Output: &log, Log: zerolog.New(&log), LogFormat: format, Command: "cde-run bench -c f.yaml --out " + format})
		sf := SeedsFailed(err)
		if sf == nil || len(sf.Failed) != 2 || sf.Failed[1].Seed != 2 || sf.Failed[0].Reason != "step 4: the policy loss is NaN: lower train.lr" {
			t.Fatalf("%s: error %v (%+v)\n%s", format, err, sf, log.String())
		}
		for _, seed := range []string{"1", "2"} {
			want := "bench [" + seed + "/2] a seed " + seed + ": FAILED after "
			line := ""
			for _, l := range strings.Split(log.String(), "\n") {
				if strings.HasPrefix(l, want) {
					line = l
				}
			}
			if !strings.HasSuffix(line, ": step 4: the policy loss is NaN: lower train.lr; to retry it (the finished arm-seeds are kept): cde-run bench -c f.yaml --out "+format) {
				t.Errorf("%s: seed %s: failed line %q\n%s", format, seed, line, log.String())
			}
		}
		if hasJSON := strings.Contains(log.String(), `{"level":"error"`); hasJSON != (format == LogJSON) {
			t.Errorf("%s: JSON log lines present: %v\n%s", format, hasJSON, log.String())
		}
		if _, err := os.Stat(filepath.Join(out, "results.md")); err != nil {
			t.Errorf("%s: no report: %v", format, err)
		}
		var sum bytes.Buffer
		Summary(&sum, out, 90*time.Second, sf)
		for _, want := range []string{"== bench finished: 2 arm-seed(s) FAILED, not in the report ==",
			"failed: a seed 1", "failed: a seed 2", "step 4: the policy loss is NaN: lower train.lr",
			"retry them", "cde-run bench -c f.yaml --out " + format, "exit status", "3 (arm-seeds failed"} {
			if !strings.Contains(sum.String(), want) {
				t.Errorf("%s: summary lacks %q:\n%s", format, want, sum.String())
			}
		}
	}
	if !errors.As(error(&SeedsFailedError{}), new(*SeedsFailedError)) {
		t.Fatal("errors.As")
	}
}
