package xla

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
)

// hfTensors returns the policy's Hugging Face weights under their
// checkpoint names, in dtype (F32 exact, BF16 rounded to nearest even),
// for ExportHF and WriteServeWeights; a LoRA policy's adapters are merged
// in (W + (alpha/r) B A).
func (b *Backend) hfTensors(dtype safetensors.DType) ([]safetensors.Tensor, error) {
	if b.policy.cfg.HF == nil {
		return nil, errors.New("the policy is cde's own transformer, not a Hugging Face architecture (model.hf)")
	}
	var ts []safetensors.Tensor
	for v := range b.policy.ctx.IterVariables() {
		if v.Scope() != "/"+hfScope {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return nil, err
		}
		data, err := b.policy.mergedWeight(v.Name(), hostFloats(val))
		if err != nil {
			return nil, err
		}
		dims := val.Shape().Dimensions
		if dtype == safetensors.BF16 {
			ts = append(ts, safetensors.BF16Tensor(v.Name(), dims, data))
		} else {
			ts = append(ts, safetensors.F32Tensor(v.Name(), dims, data))
		}
	}
	return ts, nil
}

// WriteServeWeights writes the policy into dir (created if missing) in the
// form a generation server's reload reads (`cde-run serve --reload-dir`,
// SGLang's update-weights-from-disk): for a Hugging Face architecture,
// model.safetensors in F32 under the checkpoint's tensor names and hfDir's
// config.json with torch_dtype float32 (the layout `cde-run export`
// writes, without the tokenizer files); for cde's own transformer,
// policy.gob as Save writes it. Every file is written to a temporary name
// and renamed, so a server never reads a torn file.
func (b *Backend) WriteServeWeights(dir, hfDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if b.policy.cfg.HF == nil {
		ck, err := b.policy.snapshot()
		if err != nil {
			return err
		}
		return writeGob(filepath.Join(dir, "policy.gob"), ck)
	}
	if hfDir == "" {
		return errors.New("weight sync: a Hugging Face policy needs its model directory (model.hf) for config.json")
	}
	cfgBytes, err := os.ReadFile(filepath.Join(hfDir, "config.json"))
	if err != nil {
		return fmt.Errorf("weight sync: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		return fmt.Errorf("weight sync: %s: %v", filepath.Join(hfDir, "config.json"), err)
	}
	cfg["torch_dtype"] = "float32"
	ts, err := b.hfTensors(safetensors.F32)
	if err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cb, _ := json.MarshalIndent(cfg, "", "  ")
	return core.WriteFileAtomic(filepath.Join(dir, "config.json"), append(cb, '\n'))
}
