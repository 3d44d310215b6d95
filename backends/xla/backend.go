// Package xla is cde's model backend on GoMLX: a causal transformer policy
// with KV-cache sampling, an optional K-head critic of the same design with
// its own parameters, their PPO / MSE updates with Adam, and checkpoints.
//
// Its graphs run on every engine, not only XLA's: cde's own cpu engine
// (engines/cpu, the default), GoMLX's go engine, and the xla:* engines
// (a build with -tags xla). The name is the one users already import and
// the one scripts build (the xla.test of scripts/gpucheck); it is kept,
// and this paragraph says what the package holds.
//
// Every graph (prefill, decode step, scoring, actor update, critic update) is
// one GoMLX computation, compiled once per input-shape bucket: batch sizes
// are fixed per call site and sequence lengths are padded to multiples of 8.
//
// Files by role: backend.go (the Backend and its options), generate.go
// (sampling with the KV cache), score.go (log-probs, entropies and values
// of given sequences), update.go (the actor, critic and supervised steps),
// checkpoint.go (Save, Load and their gob format), net.go (the graphs),
// model.go and hfmodel.go (the architectures).
package xla

import (
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute"
)

// Options configures a Backend.
type Options struct {
	Engine string // auto | cpu | go | xla:cpu | xla:cuda | xla:tpu
	// PJRTPlugin is backend.pjrt_plugin: the PJRT plugin library of the
	// xla:* engines ("" = PJRT_PLUGIN_LIBRARY_PATH, then standard places).
	PJRTPlugin string
	Policy     ModelConfig
	// ValueHeads K > 0 builds a critic (same sizes as the policy, own
	// parameters); 0 builds none.
	ValueHeads  int
	Seed        uint64
	ActorLR     float64
	CriticLR    float64
	MaxGradNorm float64 // global gradient-norm clip (default 1)
	PAD, EOS    int32
	// HFWeights, with a Hugging Face Policy (Policy.HF set), are the
	// checkpoint's weights: the policy starts from them, and so does the
	// critic's trunk (with a fresh value head). Nil draws random weights.
	HFWeights *safetensors.Set
	// Adapter is a PEFT LoRA adapter (model.adapter, --adapter): with
	// Policy.LoRA the adapters start from it; without, it is merged into
	// the weights (W + (alpha/r) B A).
	Adapter *peft.Adapter
	// GenBF16 (rollout.dtype: bfloat16) generates with bfloat16 copies of
	// a Hugging Face policy's weight matrices (genbf16.go).
	GenBF16 bool
}

// Backend implements core.Backend.
type Backend struct {
	opts       Options
	engine     compute.Backend
	engineName string
	policy     *net
	critic     *net
	// ref is a frozen copy of the initial policy, built on first use of
	// kl_coef > 0; for a LoRA policy, the policy with its adapters off
	// (baseView: the frozen base, no copy).
	ref *net
	// gen is the bfloat16 generation view (Options.GenBF16), made on the
	// first Generate.
	gen *bf16View
}

var (
	_ core.Backend         = (*Backend)(nil)
	_ core.ReferenceScorer = (*Backend)(nil)
)

// New builds the policy (and critic) with weights drawn from opts.Seed.
func New(opts Options) (*Backend, error) {
	if opts.MaxGradNorm == 0 {
		opts.MaxGradNorm = 1
	}
	eng, err := NewEngine(opts.Engine, opts.PJRTPlugin)
	if err != nil {
		return nil, err
	}
	b := &Backend{opts: opts, engine: eng, engineName: eng.Name()}
	if b.policy, err = newNet(eng, opts.Policy, opts.Seed, opts.HFWeights, opts.Adapter, nil); err != nil {
		return nil, err
	}
	if opts.Policy.LoRA != nil {
		b.ref = b.policy.baseView()
	}
	if opts.ValueHeads > 0 {
		cc := opts.Policy
		cc.ValueK = opts.ValueHeads
		var share *net
		if cc.LoRA != nil {
			share = b.policy // the critic's trunk is the policy's frozen weights plus its own adapters
		}
		if b.critic, err = newNet(eng, cc, opts.Seed+1, opts.HFWeights, opts.Adapter, share); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Engine names the GoMLX engine in use.
func (b *Backend) Engine() string { return b.engineName + " (" + b.engine.Description() + ")" }

// Close releases the engine.
func (b *Backend) Close() error {
	b.engine.Finalize()
	return nil
}

// stopped reports whether done is closed (nil never is).
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
