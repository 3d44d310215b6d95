package xla

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// LoadPolicyWeights replaces the policy's weights (not its optimiser state,
// the critic or the KL reference) with those found in dir, for a server
// that follows a trainer's weight sync:
//
//   - a Hugging Face policy reads dir/model.safetensors, or the shards of
//     dir/model.safetensors.index.json, under the checkpoint's tensor names
//     (what ExportHF writes; F32, F16 or BF16), falling back to
//     dir/policy.gob when neither is there;
//   - cde's own transformer reads dir/policy.gob (what Save writes), whose
//     recorded model sizes must equal the policy's.
//
// Every tensor is checked (present, no extras, shape, finite values) before
// any is assigned, so a bad file leaves the old weights serving. Compiled
// graphs read the variables at each call, so the next Generate samples
// from the new weights.
func (b *Backend) LoadPolicyWeights(dir string) error {
	n := b.policy
	if n.cfg.HF != nil && (fileExists(filepath.Join(dir, "model.safetensors")) || fileExists(filepath.Join(dir, safetensors.IndexFile))) {
		return loadSafetensorsWeights(n, dir)
	}
	path := filepath.Join(dir, "policy.gob")
	if !fileExists(path) {
		if n.cfg.HF != nil {
			return fmt.Errorf("reload %s: no model.safetensors, %s or policy.gob", dir, safetensors.IndexFile)
		}
		return fmt.Errorf("reload %s: no policy.gob", dir)
	}
	var ck checkpoint
	if err := readGob(path, &ck); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if !sameSizes(ck.Config, n.cfg) {
		return fmt.Errorf("reload %s: model sizes %+v differ from the served %+v", path, ck.Config, n.cfg)
	}
	vals := map[*model.Variable]*tensors.Tensor{}
	for _, v := range n.trainable() {
		st, ok := ck.Vars[v.Path()]
		if !ok {
			return fmt.Errorf("reload %s: variable %s missing", path, v.Path())
		}
		if !slices.Equal(st.Dims, v.Shape().Dimensions) || len(st.Data) != v.Shape().Size() {
			return fmt.Errorf("reload %s: variable %s has shape %v (%d values), the model wants %v", path, v.Path(), st.Dims, len(st.Data), v.Shape().Dimensions)
		}
		if err := checkFinite(st.Data); err != nil {
			return fmt.Errorf("reload %s: variable %s: %w", path, v.Path(), err)
		}
		vals[v] = tensors.FromFlatDataAndDimensions(slices.Clone(st.Data), st.Dims...)
	}
	return assign(vals)
}

// sameSizes reports whether a checkpoint's model config describes the same
// model as the served one (the init scale aside).
func sameSizes(a, b ModelConfig) bool {
	a.InitStd, b.InitStd = 0, 0
	a.Recompute, b.Recompute = false, false
	return reflect.DeepEqual(a, b)
}

// loadSafetensorsWeights reads a Hugging Face policy's weights from dir's
// safetensors files into n, after checking every tensor against the
// variables of n's hfScope (names, shapes, finiteness).
func loadSafetensorsWeights(n *net, dir string) error {
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	defer set.Close()
	vars := map[string]*model.Variable{}
	for _, v := range n.trainable() {
		if v.Scope() == "/"+hfScope {
			vars[v.Name()] = v
		}
	}
	for _, name := range set.Names() {
		if _, ok := vars[name]; ok {
			continue
		}
		if strings.HasSuffix(name, "rotary_emb.inv_freq") || (name == "lm_head.weight" && n.cfg.HF.TieEmbeddings) {
			continue // as loadHFParams: a saved buffer, or the tied head's copy
		}
		return fmt.Errorf("reload %s: tensor %q is not a weight of the served %s", dir, name, n.cfg.HF.Arch)
	}
	vals := map[*model.Variable]*tensors.Tensor{}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		v := vars[name]
		info, ok := set.Info(name)
		if !ok {
			return fmt.Errorf("reload %s: tensor %q missing", dir, name)
		}
		if !slices.Equal(info.Shape, v.Shape().Dimensions) {
			return fmt.Errorf("reload %s: tensor %q has shape %v, the served model's is %v", dir, name, info.Shape, v.Shape().Dimensions)
		}
		data, _, err := set.Float32(name)
		if err != nil {
			return fmt.Errorf("reload %s: %w", dir, err)
		}
		if err := checkFinite(data); err != nil {
			return fmt.Errorf("reload %s: tensor %q: %w", dir, name, err)
		}
		vals[v] = tensors.FromFlatDataAndDimensions(data, info.Shape...)
	}
	return assign(vals)
}

func checkFinite(data []float32) error {
	for i, x := range data {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("element %d is %v", i, x)
		}
	}
	return nil
}

// assign sets every variable once all values have been checked.
func assign(vals map[*model.Variable]*tensors.Tensor) error {
	if len(vals) == 0 {
		return errors.New("reload: the model has no weights to set")
	}
	for v, t := range vals {
		if err := v.SetValue(t); err != nil {
			return fmt.Errorf("reload: setting %s: %w", v.Path(), err)
		}
	}
	return nil
}

// ReadPolicyConfig returns the model sizes recorded in dir/policy.gob (what
// Save writes), so a server can build the model a bare checkpoint directory
// holds before loading it.
func ReadPolicyConfig(dir string) (ModelConfig, error) {
	path := filepath.Join(dir, "policy.gob")
	if _, err := os.Stat(path); err != nil {
		return ModelConfig{}, err
	}
	var ck checkpoint
	if err := readGob(path, &ck); err != nil {
		return ModelConfig{}, err
	}
	return ck.Config, nil
}
