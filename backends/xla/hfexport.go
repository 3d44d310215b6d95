package xla

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/tokenizer"
)

// hfCopiedFiles are the files of a Hugging Face model directory that
// ExportHF copies beside the weights (those present).
var hfCopiedFiles = []string{"generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "LICENSE"}

// ExportHF writes the policy, a Hugging Face architecture, as a model
// directory out that transformers, vLLM and SGLang load: model.safetensors
// (dtype F32, exact, or BF16, rounded to nearest even) with the weights under
// their checkpoint names, src's config.json (torch_dtype set to match) and
// src's tokenizer and generation files. out must not exist; it is written
// under a temporary name and renamed when complete.
func (b *Backend) ExportHF(src, out string, dtype safetensors.DType) error {
	if b.policy.cfg.HF == nil {
		return errors.New("export: the policy is cde's own transformer, not a Hugging Face architecture (model.hf)")
	}
	if dtype != safetensors.F32 && dtype != safetensors.BF16 {
		return fmt.Errorf("export: dtype %q: want F32 or BF16", dtype)
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("export: %s exists; choose a new directory", out)
	}
	cfgBytes, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		return fmt.Errorf("export: %s: %v", filepath.Join(src, "config.json"), err)
	}
	cfg["torch_dtype"] = map[safetensors.DType]string{safetensors.F32: "float32", safetensors.BF16: "bfloat16"}[dtype]
	tmp := out + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ts, err := b.hfTensors(dtype)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(tmp, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cb, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), append(cb, '\n'), 0o644); err != nil {
		return err
	}
	for _, name := range hfCopiedFiles {
		data, err := os.ReadFile(filepath.Join(src, name))
		if name == "tokenizer.json" {
			// A tokenizer shipped gzipped (cde reads either) is written
			// out plain: transformers reads only tokenizer.json.
			data, _, err = tokenizer.ReadJSON(filepath.Join(src, name))
		}
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return err
		}
	}
	if strings.HasSuffix(out, string(filepath.Separator)) {
		out = filepath.Clean(out)
	}
	return os.Rename(tmp, out)
}
