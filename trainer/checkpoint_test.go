package trainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// A NaN loss at the third update stops the run at step 2 with an error
// naming the step and the quantity; nothing of step 2 is written (no metrics
// row, no checkpoint), and the checkpoint of step 2 holds the state after
// two updates.
func TestNonFiniteLossStopsTheRun(t *testing.T) {
	be := &fakeBackend{nanAtUpdate: 3}
	tr := fakeTrainer(t, fakeConfig(t, 6, 1), be)
	err := tr.Run(context.Background(), 0)
	var nf *core.NonFiniteError
	if !errors.As(err, &nf) || nf.Quantity != "actor/loss" || !strings.Contains(err.Error(), "step 2:") {
		t.Fatalf("got %v, want step 2: non-finite actor/loss", err)
	}
	if got := metricSteps(t, tr.RunDir); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("metrics rows for steps %v, want [0 1]", got)
	}
	dir, _, err := ResumeCheckpoint(tr.RunDir)
	if err != nil || filepath.Base(dir) != "step-000002" {
		t.Fatalf("newest checkpoint %q (%v), want step-000002", dir, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "policy.txt"))
	if string(data) != "2" {
		t.Fatalf("checkpoint holds %q updates, want 2", data)
	}
}

// crashAt makes the next Checkpoint "die" (panic) at point of step.
func crashAt(t *testing.T, point string, step int, f func()) {
	t.Helper()
	crashHook = func(p string, s int) {
		if p == point && s == step {
			panic("crash")
		}
	}
	defer func() {
		crashHook = nil
		if r := recover(); r != "crash" {
			t.Fatalf("did not reach crash point %s:%d (recovered %v)", point, step, r)
		}
	}()
	f()
}

// Every instant of a checkpoint write, first write and replacement of the
// same step, both with the atomic exchange and with the move-aside
// fallback: after a crash there, resume finds a complete checkpoint holding
// the state it names, never an error or a missing directory.
func TestCheckpointCrashAtEveryInstant(t *testing.T) {
	cases := []struct {
		point    string
		replace  bool // step 4 is written a second time (a resume at 4)
		exchange bool
		want     string // checkpoint resume picks
		updates  string // its state
	}{
		{"checkpoint.files", false, true, "step-000002", "2"},
		{"checkpoint.manifest", false, true, "step-000002", "2"},
		{"checkpoint.installed", false, true, "step-000004", "4"},
		{"checkpoint.latest", false, true, "step-000004", "4"},
		{"checkpoint.files", true, true, "step-000004", "4"},
		{"checkpoint.manifest", true, true, "step-000004", "4"},
		{"checkpoint.exchanged", true, true, "step-000004", "40"},
		{"checkpoint.installed", true, true, "step-000004", "40"},
		{"checkpoint.moved-aside", true, false, "step-000004.old", "4"},
		{"checkpoint.installed", true, false, "step-000004", "40"},
	}
	for _, c := range cases {
		name := c.point
		if c.replace {
			name += "/replace"
		}
		if !c.exchange {
			name += "/move-aside"
		}
		t.Run(name, func(t *testing.T) {
			exchange = c.exchange
			defer func() { exchange = true }()
			be := &fakeBackend{}
			tr := fakeTrainer(t, fakeConfig(t, 10, 2), be)
			for _, step := range []int{2, 4} {
				be.updates = step
				if step == 4 && !c.replace {
					crashAt(t, c.point, 4, func() { tr.Checkpoint(4) })
					break
				}
				if err := tr.Checkpoint(step); err != nil {
					t.Fatal(err)
				}
			}
			if c.replace {
				be.updates = 40
				crashAt(t, c.point, 4, func() { tr.Checkpoint(4) })
			}
			dir, _, err := ResumeCheckpoint(tr.RunDir)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(dir) != c.want {
				t.Fatalf("resume picks %s, want %s", filepath.Base(dir), c.want)
			}
			fresh := &fakeBackend{}
			tr2 := fakeTrainer(t, tr.Cfg, fresh)
			step, err := tr2.Restore(dir)
			if err != nil {
				t.Fatal(err)
			}
			if step != 4 && c.want != "step-000002" || step != 2 && c.want == "step-000002" {
				t.Fatalf("restored step %d from %s", step, c.want)
			}
			if strconv.Itoa(fresh.updates) != c.updates {
				t.Fatalf("restored state %d, want %s", fresh.updates, c.updates)
			}
			// The next checkpoint cleans up every leftover of the crash.
			be.updates = 6
			if err := tr.Checkpoint(6); err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(checkpointRoot(tr.RunDir))
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), partialSuffix) || strings.HasSuffix(e.Name(), oldSuffix) {
					t.Fatalf("leftover %s after the next checkpoint", e.Name())
				}
			}
		})
	}
}

// A flipped byte or a truncated file in a complete checkpoint is an error
// naming the file, not a silent load and not a silent fallback.
func TestCorruptCheckpointIsAnError(t *testing.T) {
	for _, corrupt := range []func(path string) error{
		func(path string) error { // flip one bit
			data, _ := os.ReadFile(path)
			data[0] ^= 1
			return os.WriteFile(path, data, 0o644)
		},
		func(path string) error { return os.Truncate(path, 0) },
		os.Remove,
	} {
		be := &fakeBackend{updates: 12}
		tr := fakeTrainer(t, fakeConfig(t, 10, 2), be)
		if err := tr.Checkpoint(2); err != nil {
			t.Fatal(err)
		}
		be.updates = 345
		if err := tr.Checkpoint(4); err != nil {
			t.Fatal(err)
		}
		if err := corrupt(filepath.Join(checkpointRoot(tr.RunDir), "step-000004", "policy.txt")); err != nil {
			t.Fatal(err)
		}
		_, _, err := ResumeCheckpoint(tr.RunDir)
		if err == nil || !strings.Contains(err.Error(), "policy.txt") {
			t.Fatalf("got %v, want an error naming policy.txt", err)
		}
		if _, err := tr.Restore(filepath.Join(checkpointRoot(tr.RunDir), "step-000004")); err == nil {
			t.Fatal("Restore loaded a corrupt checkpoint")
		}
	}
}

// A resumed run may change train.steps but not the algorithm, a strategy,
// the task or the seed: the error names the key and both values.
func TestRestoreRefusesFixedKeyChanges(t *testing.T) {
	be := &fakeBackend{}
	cfg := fakeConfig(t, 10, 2)
	tr := fakeTrainer(t, cfg, be)
	if err := tr.Checkpoint(2); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(checkpointRoot(tr.RunDir), "step-000002")
	cases := []struct {
		set  string
		want string // "" = allowed
	}{
		{"train.steps=50", ""},
		{"train.actor_lr=0.5", ""},
		{"eval.k=8", ""},
		{"algorithm.name=ppo", `algorithm.name from "grpo" to "ppo"`},
		{"task.levels=[2]", `task.levels from (unset) to [2]`},
		{"model.d_model=128", `model.d_model from 64 to 128`},
		{"strategies=[{name: ppl}]", `strategies from [] to [{"name":"ppl"}]`},
	}
	// With a plugin entry, its pin and timeouts may change, nothing else.
	pcfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=10", "strategies=[{plugin: ./p, sha256: aa, params: {x: 1}}]"}})
	if err != nil {
		t.Fatal(err)
	}
	ptr := fakeTrainer(t, pcfg, &fakeBackend{})
	if err := ptr.Checkpoint(2); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(checkpointRoot(ptr.RunDir), "step-000002")
	for set, want := range map[string]string{
		"strategies=[{plugin: ./p, sha256: bb, call_timeout: 60s, params: {x: 1}}]": "",
		"strategies=[{plugin: ./p, sha256: aa, params: {x: 2}}]":                    "strategies[0].params.x from 1 to 2",
		"strategies=[{plugin: ./q, sha256: aa, params: {x: 1}}]":                    `strategies[0].plugin from "./p" to "./q"`,
	} {
		c2, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=10", set}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = fakeTrainer(t, c2, &fakeBackend{}).Restore(pdir)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("--set %s: got %v, want %q", set, err, want)
		}
	}
	for _, c := range cases {
		cfg2, err := LoadConfig(LoadOptions{Env: []string{}, Sets: append([]string{
			"train.steps=10", "train.checkpoint_every=2", "train.keep_checkpoints=3", "train.prompts_per_step=2",
			"rollout.n=2", "eval.every=0"}, c.set)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = fakeTrainer(t, cfg2, &fakeBackend{}).Restore(dir)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("--set %s: got %v, want %q", c.set, err, c.want)
		}
	}
}

// A manifest written before model.lora and model.adapter were fixed keys
// resumes with their defaults, and is refused with any other value.
func TestCompareFixedNewKeys(t *testing.T) {
	cfg, err := LoadConfig(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	old := fixedConfig(cfg)
	delete(old, "model.lora")
	delete(old, "model.adapter")
	if err := compareFixed(old, fixedConfig(cfg)); err != nil {
		t.Fatalf("defaults against an older manifest: %v", err)
	}
	lora, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"model.hf=m", "model.lora.rank=8"}})
	if err != nil {
		t.Fatal(err)
	}
	saved := fixedConfig(lora)
	delete(saved, "model.lora")
	if err := compareFixed(saved, fixedConfig(lora)); err == nil || !strings.Contains(err.Error(), "model.lora.rank from 0 to 8") {
		t.Fatalf("rank 8 against an older manifest: %v", err)
	}
	// A manifest whose model.lora predates model.lora.base_dtype: its
	// default (float32) resumes, bfloat16 is refused.
	saved = fixedConfig(lora)
	delete(saved["model.lora"].(map[string]any), "base_dtype")
	if err := compareFixed(saved, fixedConfig(lora)); err != nil {
		t.Fatalf("float32 base against a manifest without base_dtype: %v", err)
	}
	bf, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"model.hf=m", "model.lora.rank=8", "model.lora.base_dtype=bfloat16"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := compareFixed(saved, fixedConfig(bf)); err == nil || !strings.Contains(err.Error(), `model.lora.base_dtype from "float32" to "bfloat16"`) {
		t.Fatalf("bfloat16 base against a manifest without base_dtype: %v", err)
	}
}
