package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tiny is a shape that runs in well under a second per engine.
var tiny = []string{"--vocab", "20", "--layers", "1", "--d-model", "16", "--heads", "2",
	"--batch", "4", "--prompt", "3", "--response", "4", "--warmup", "1", "--reps", "1", "--quiet",
	"--quiet-wait", "0", "--retries", "0", "--settle", "0"}

func TestHarnessTinyNoTorch(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var out bytes.Buffer
	args := append(append([]string{}, tiny...), "--engines", "cpu,go", "--torch", "off", "--json", jsonPath)
	if err := run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"parameters: go (GoMLX context variables) 4912, go (model.go formula) 4912",
		"torch: skipped (--torch off)", "score (forward + token log-probs)", "actor train step (PPO + Adam)",
		"KV-cache sampling", "tok/s", "cpu/go"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ParamsGoContext != formulaParams(rep.Shape) {
		t.Errorf("context params %d != formula %d", rep.ParamsGoContext, formulaParams(rep.Shape))
	}
	for _, op := range measurements {
		for _, e := range []string{"cpu", "go"} {
			st := rep.Results[op][e]
			if st == nil || len(st.SamplesS) != 1 || !(st.MedianS > 0) {
				t.Errorf("%s/%s: bad stat %+v", op, e, st)
			}
		}
		if _, ok := rep.Ratios[op]["cpu/go"]; !ok {
			t.Errorf("%s: no cpu/go ratio", op)
		}
	}
}

func TestHelp(t *testing.T) {
	if err := run([]string{"--help"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	if err := run([]string{"--preset", "nope"}, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func haveTorch(t *testing.T) {
	t.Helper()
	if ok, msg := torchImportable("/usr/bin/python3"); !ok {
		t.Skip(msg)
	}
	if _, err := os.Stat(defaultScript()); err != nil {
		t.Skip(err)
	}
}

// TestTorchScriptTiny runs torch_ref.py on its own and parses its JSON.
func TestTorchScriptTiny(t *testing.T) {
	haveTorch(t)
	out, err := exec.Command("/usr/bin/python3", defaultScript(), "--vocab", "20", "--layers", "1", "--d-model", "16",
		"--heads", "2", "--batch", "4", "--prompt", "3", "--response", "4", "--reps", "1", "--warmup", "0").Output()
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ParamCount int            `json:"param_count"`
		BLAS       map[string]any `json:"blas"`
		Results    map[string]struct {
			MedianS  float64   `json:"median_s"`
			SamplesS []float64 `json:"samples_s"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sh := Shape{Vocab: 20, Layers: 1, DModel: 16, Heads: 2, FF: 64, MaxLen: 64}
	if res.ParamCount != formulaParams(sh) {
		t.Errorf("torch params %d, model.go formula %d", res.ParamCount, formulaParams(sh))
	}
	if _, ok := res.BLAS["openblas_loaded"]; !ok {
		t.Errorf("no BLAS report: %v", res.BLAS)
	}
	for _, op := range measurements {
		if r, ok := res.Results[op]; !ok || len(r.SamplesS) != 1 {
			t.Errorf("%s: %+v", op, r)
		}
	}
}

// TestHarnessTinyTorch runs the harness with the torch reference and checks
// that the cpu engine and torch agree on the same weights.
func TestHarnessTinyTorch(t *testing.T) {
	haveTorch(t)
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	args := append(append([]string{}, tiny...), "--engines", "cpu", "--torch", "required", "--json", jsonPath)
	var out bytes.Buffer
	if err := run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "torch 4912: EQUAL") || !strings.Contains(out.String(), "cpu/torch") {
		t.Errorf("output:\n%s", out.String())
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 1 || rep.Checks[0].Error != "" {
		t.Fatalf("checks: %+v", rep.Checks)
	}
	ck := rep.Checks[0]
	if ck.ScoreLogProbMaxDiff > 1e-4 || ck.TrainMetricMaxRelDiff > 1e-3 || ck.TrainParamFracBig > 1e-3 {
		t.Errorf("cpu engine and torch disagree: %+v", ck)
	}
}
