package tensorboard

import (
	"reflect"
	"testing"
	"time"

	"github.com/cde-rl/cde/internal/tensorboard/tbtest"
)

// The config event, decoded by the independent reader: at the step the
// writer opened at, an hparams session start (plugin "hparams", version
// 0, data class tensor, the float scalar 0 as its tensor) with one
// hyperparameter per leaf under its dotted key, numbers, booleans and
// strings as themselves and lists and empty maps as JSON text; and the
// YAML as a Markdown code block (plugin "text", a string scalar). A
// resumed writer does not write it twice; one that starts over at step 0
// drops and rewrites it.
func TestConfigHParamsAndText(t *testing.T) {
	cfg := map[string]any{
		"algorithm": map[string]any{"name": "grpo"},
		"train":     map[string]any{"seed": 7, "lr": 0.0005, "logger": []any{"jsonl", "tensorboard"}, "steps": 200},
		"eval":      map[string]any{"set_k": map[string]any{}, "details": true},
		"preset":    "none",
	}
	dir := t.TempDir()
	w, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 500000000)
	if err := w.Config(at, cfg); err != nil {
		t.Fatal(err)
	}
	w.Scalars(0, at, map[string]float64{"x": 1})
	w.Scalars(1, at, map[string]float64{"x": 2})
	w.Close()
	recs := tbtest.Read(t, w.Path)
	if len(recs) != 4 {
		t.Fatalf("%d records, want file version, config, 2 steps: %v", len(recs), recs)
	}
	r := recs[1]
	if r["step"] != 0.0 || r["wall_time"] != 1700000000.5 || r["scalars"] != nil {
		t.Fatalf("config record %v", r)
	}
	tensors := r["tensors"].(map[string]any)
	hp := tensors["_hparams_/session_start_info"].(map[string]any)
	wantHP := map[string]any{
		"algorithm.name": "grpo", "train.seed": 7.0, "train.lr": 0.0005, "train.steps": 200.0,
		"train.logger": `["jsonl","tensorboard"]`, "eval.set_k": "{}", "eval.details": true, "preset": "none",
	}
	if hp["plugin"] != "hparams" || hp["hparams_version"] != 0.0 || hp["data_class"] != 2.0 || hp["dtype"] != 1.0 ||
		!reflect.DeepEqual(hp["floats"], []any{0.0}) || !reflect.DeepEqual(hp["shape"], []any{}) || hp["start_time_secs"] != 1700000000.5 {
		t.Errorf("hparams value %v", hp)
	}
	if !reflect.DeepEqual(hp["hparams"], wantHP) {
		t.Errorf("hparams %v\nwant %v", hp["hparams"], wantHP)
	}
	text := tensors["config"].(map[string]any)
	wantText := "    algorithm:\n        name: grpo\n    eval:\n        details: true\n        set_k: {}\n    preset: none\n" +
		"    train:\n        logger:\n            - jsonl\n            - tensorboard\n        lr: 0.0005\n        seed: 7\n        steps: 200"
	if text["plugin"] != "text" || text["dtype"] != 7.0 || text["data_class"] != 2.0 || !reflect.DeepEqual(text["shape"], []any{}) ||
		!reflect.DeepEqual(text["strings"], []any{wantText}) {
		t.Errorf("text value %v\nwant %q", text, wantText)
	}

	count := func() int {
		n := 0
		for _, r := range tbtest.Read(t, w.Path) {
			if ts, ok := r["tensors"].(map[string]any); ok && ts["_hparams_/session_start_info"] != nil {
				n++
			}
		}
		return n
	}
	w2, err := Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Config(at, cfg); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	if n := count(); n != 1 {
		t.Errorf("resumed at step 1: %d config events, want 1", n)
	}
	w3, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w3.Config(at, cfg); err != nil {
		t.Fatal(err)
	}
	w3.Close()
	if n := count(); n != 1 {
		t.Errorf("started over: %d config events, want 1", n)
	}
}
