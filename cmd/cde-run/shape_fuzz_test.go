package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/cli"
	"github.com/cde-rl/cde/internal/fuzzlimit"
	"github.com/cde-rl/cde/trainer"
)

// shapeFuzzConfigs cover every in-tree algorithm path and strategy hook.
var shapeFuzzConfigs = []string{
	"algorithm: {name: grpo}\nstrategies: [{name: ppl}, {name: simhash, bits: 4}, {name: entropy, coef: 0.01}]\n",
	"algorithm: {name: ppo}\ntrain: {value_heads: 2}\nstrategies: [{name: ppl}, {name: multihead, heads: 2}]\n",
	"algorithm: {name: grpo, norm_by_std: false}\n",
	"algorithm: {name: ppo}\n",
}

// FuzzShape runs `cde-run shape` in process on arbitrary rollout files: no
// panic; an error names the rollout file; an accepted file gives one output
// sequence per input sequence, with per-token arrays of the input's length.
// Its minimisation is bounded (fuzzlimit): unbounded, minimising each new
// input of a few hundred bytes took the fuzzer up to its 60 s limit, with
// no execution counted meanwhile.
func FuzzShape(f *testing.F) {
	f.Add([]byte(`{"step": 1, "total_steps": 4, "sequences": [{"group": 0, "reward": 1, "logprobs": [-1, -2], "values": [[0.5, 1], [0, 2]], "entropies": [1, 2], "embedding": [1, -1]},
	  {"group": 0, "reward": -1, "logprobs": [-0.5], "values": [[0, 0]], "entropies": [0.1], "embedding": [0.5, 2]}]}`), uint8(0))
	f.Add([]byte(`{"step": 0, "sequences": [{"group": 7, "reward": 1e308, "logprobs": [-1e308], "values": [[1e308, -1e308]], "entropies": [0], "embedding": [1e308, 0]}]}`), uint8(1))
	f.Add([]byte(`{"step": 0, "sequences": [{"group": 0, "reward": 0, "logprobs": [0], "values": [[0]]}]}`), uint8(3))
	dir := f.TempDir()
	// The configs are loaded once: parsing YAML is work that does not
	// depend on the input, and under the fuzzer's instrumentation it cost
	// most of each execution.
	var cfgs []*trainer.Config
	for i, c := range shapeFuzzConfigs {
		p := filepath.Join(dir, "cfg"+string(rune('0'+i))+".yaml")
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			f.Fatal(err)
		}
		cf := cli.ConfigFlags{File: p}
		cfg, err := cf.Load()
		if err != nil {
			f.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	fuzzlimit.MinimizeTime("2s")
	const in = "batch.json"
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		// In memory: the file system is work that does not depend on the
		// input (ReadRolloutFile is ReadRollout on the opened file).
		r, err := core.ReadRollout(bytes.NewReader(data), in)
		var out []byte
		if err == nil {
			out, err = shapeRollout(cfgs[int(which)%len(cfgs)], r, in, zerolog.Nop())
		}
		if err != nil {
			if !strings.Contains(err.Error(), in) {
				t.Fatalf("error does not name the rollout file: %v", err)
			}
			return
		}
		var o shapeOut
		if err := json.Unmarshal(out, &o); err != nil {
			t.Fatalf("output is not JSON: %v", err)
		}
		var inFile struct {
			Sequences []struct {
				LogProbs []any `json:"logprobs"`
			} `json:"sequences"`
		}
		if err := json.Unmarshal(data, &inFile); err != nil {
			t.Fatalf("accepted input is not JSON: %v", err)
		}
		if len(o.Sequences) != len(inFile.Sequences) {
			t.Fatalf("%d sequences out, %d in", len(o.Sequences), len(inFile.Sequences))
		}
		for i, s := range o.Sequences {
			T := len(inFile.Sequences[i].LogProbs)
			if len(s.Advantages) != T || len(s.Returns) != T || len(s.AdvantageBonus) != T {
				t.Fatalf("sequence %d: %d/%d/%d per-token values for %d tokens", i, len(s.Advantages), len(s.Returns), len(s.AdvantageBonus), T)
			}
		}
	})
}
