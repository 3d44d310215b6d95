package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// withShebang copies the script src into dir with its first line replaced
// by "#!" + py, executable.
func withShebang(t *testing.T, src, dir, py string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.HasPrefix(text, "#!") {
		text = text[strings.IndexByte(text, '\n')+1:]
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, []byte("#!"+py+"\n"+text), 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A Python strategy trains and resumes exactly like a Go one: the
// answer-count example with history (its state is in the checkpoints) and
// a constant weight 0.7 (applied by the host); a run killed with SIGKILL
// after its step-2 checkpoint and resumed writes the same metrics, bit for
// bit, as an uninterrupted run.
func TestTrainWithPythonPlugin(t *testing.T) {
	py := pythonForPlugins(t)
	tmp := t.TempDir()
	plugin := withShebang(t, filepath.Join("..", "..", "plugins", "examples", "python-answercount", "answercount.py"), tmp, py)
	sdk, _ := filepath.Abs(filepath.Join("..", "..", "python"))
	cfg := filepath.Join(tmp, "py.yaml")
	writeFile(t, cfg, tinyBase+`train: {steps: 6, prompts_per_step: 4, checkpoint_every: 2}
strategies:
  - {plugin: `+plugin+`, params: {beta: 0.5, history: true}, weight: {schedule: constant, w0: 0.7}, start_timeout: 30s}
`)
	env := append(os.Environ(), "PYTHONPATH="+sdk, "GOMLX_NO_AUTO_INSTALL=1")
	train := func(args ...string) *exec.Cmd {
		cmd := exec.Command(cdeRun, append([]string{"train"}, args...)...)
		cmd.Env = env
		return cmd
	}
	full := filepath.Join(tmp, "full")
	if out, err := train("--config", cfg, "--run-dir", full).CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	want := readMetrics(t, filepath.Join(full, "metrics.jsonl"))
	seen := false
	for _, row := range want {
		if w, ok := row["explore/answercount/weight"].(float64); ok {
			seen = true
			if w != 0.7 {
				t.Fatalf("explore/answercount/weight = %v, want 0.7", w)
			}
		}
	}
	if !seen {
		t.Fatalf("no explore/answercount/* metrics in %v", want[0])
	}

	killed := filepath.Join(tmp, "killed")
	cmd := train("--config", cfg, "--run-dir", killed)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAtCheckpoint(t, cmd, killed, "step-2 checkpoint", func(latest string) bool { return latest == "step-000002" })
	if n := len(readMetrics(t, filepath.Join(killed, "metrics.jsonl"))); n >= len(want) {
		t.Fatalf("the run finished before it was killed (%d lines); the test proves nothing", n)
	}
	if out, err := train("--resume", killed).CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	sameMetrics(t, want, readMetrics(t, filepath.Join(killed, "metrics.jsonl")))
}

// Each Python example passes `cde-run plugins check` and trains 3 steps.
func TestPythonExamples(t *testing.T) {
	py := pythonForPlugins(t)
	sdk, _ := filepath.Abs(filepath.Join("..", "..", "python"))
	for _, ex := range []struct{ dir, file, params, metric string }{
		{"python-answercount", "answercount.py", "{beta: 0.5, history: true}", "explore/answercount/distinct_frac"},
		{"python-ppl", "ppl.py", "{kappa: 3}", "explore/ppl/clip_frac"},
	} {
		t.Run(ex.dir, func(t *testing.T) {
			tmp := t.TempDir()
			plugin := withShebang(t, filepath.Join("..", "..", "plugins", "examples", ex.dir, ex.file), tmp, py)
			env := append(os.Environ(), "PYTHONPATH="+sdk)
			check := exec.Command(cdeRun, "plugins", "check", plugin, "--params", ex.params, "--start-timeout", "30s")
			check.Env = env
			if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS: ") {
				t.Fatalf("plugins check: %v\n%s", err, out)
			}
			cfg := filepath.Join(tmp, "c.yaml")
			writeFile(t, cfg, tinyBase+"train: {steps: 3, prompts_per_step: 4}\nstrategies:\n  - {plugin: "+plugin+", params: "+ex.params+", start_timeout: 30s}\n")
			run := filepath.Join(tmp, "run")
			train := exec.Command(cdeRun, "train", "--config", cfg, "--run-dir", run)
			train.Env = env
			if out, err := train.CombinedOutput(); err != nil {
				t.Fatalf("train: %v\n%s", err, out)
			}
			rows := readMetrics(t, filepath.Join(run, "metrics.jsonl"))
			n := 0
			for _, row := range rows {
				if _, ok := row[ex.metric]; ok {
					n++
				}
			}
			if n != 3 {
				t.Fatalf("%s in %d of the 3 steps' rows", ex.metric, n)
			}
		})
	}
}
