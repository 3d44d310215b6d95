package session

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/engines/cpu"
	"github.com/cde-rl/cde/trainer"
)

// MemoryPart is one term of a run's memory estimate: what it is, its size
// in bytes and the config keys that drive it.
type MemoryPart struct {
	Name  string
	Bytes float64
	Keys  string
}

// MemoryEstimate is a run's estimated peak host memory: Fixed (the
// runtime, the model's state) plus the largest of the Passes (one
// generation or training pass is live at a time).
type MemoryEstimate struct {
	Fixed, Passes []MemoryPart
}

// Total is the estimate in bytes.
func (e MemoryEstimate) Total() float64 {
	var t, peak float64
	for _, p := range e.Fixed {
		t += p.Bytes
	}
	for _, p := range e.Passes {
		peak = max(peak, p.Bytes)
	}
	return t + peak
}

// Largest is the largest pass.
func (e MemoryEstimate) Largest() MemoryPart {
	var best MemoryPart
	for _, p := range e.Passes {
		if p.Bytes > best.Bytes {
			best = p
		}
	}
	return best
}

// String is the estimate and its terms, for logs and errors.
func (e MemoryEstimate) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s in all", gb(e.Total()))
	for _, p := range e.Fixed {
		fmt.Fprintf(&b, "; %s %s (%s)", p.Name, gb(p.Bytes), p.Keys)
	}
	l := e.Largest()
	fmt.Fprintf(&b, "; the largest pass, %s, %s (%s)", l.Name, gb(l.Bytes), l.Keys)
	return b.String()
}

func gb(x float64) string {
	switch {
	case x >= 1e12:
		return fmt.Sprintf("%.3g TB", x/1e12)
	case x >= 1e9:
		return fmt.Sprintf("%.3g GB", x/1e9)
	}
	return fmt.Sprintf("%.3g MB", x/1e6)
}

// runtimeBytes is what a run holds whatever its sizes: the Go runtime, the
// binary, the task's problems and tokenizer (measured: an idle cde-run
// serve of the default model is 37 MB resident).
const runtimeBytes = 64e6

// EstimateMemory estimates the peak host memory of a run of cfg with the
// policy p (its vocabulary and sizes resolved), a critic of valueHeads
// heads (0: none) and evaluation passes of at most evalRows rows. Every
// tensor is float32; the terms are
//
//	model state   policy weights, gradients and Adam's two moments (16 bytes
//	              a parameter), the same for the critic, and a frozen copy
//	              of the policy with train.kl_coef > 0. With model.lora:
//	              the frozen weights once (4 bytes a parameter, 2 with
//	              model.lora.base_dtype bfloat16, shared by
//	              the critic, and the KL reference is the same weights with
//	              the adapters off), and 16 bytes per adapter parameter
//	              (r (in + out) per adapted projection) for the policy and
//	              again for the critic, plus its value head
//	generation    (of the training batch unless rollout.servers generate
//	              it, and of an evaluation) per row: the key/value caches of every layer for
//	              model.max_len positions, double-buffered (in and out of a
//	              decode step), the prefill's activations and attention
//	              scores, and the last position's logits (4 buffers)
//	training      per row of a micro-batch (train.micro_batch_size, else
//	              the minibatch): the activations kept for the backward
//	              pass, the attention probabilities, and the logits with
//	              their log-softmax and gradient, over model.max_len
//	              positions; twice with a critic. With model.recompute:
//	              every block's input, one block's activations and
//	              attention probabilities, and the logits terms for one
//	              chunk of positions (at most xla.TrainChunkBytes of logits)
//	columns       the step's per-token signals (core/columns.go), float64
//	              for every token of train.prompts_per_step x rollout.n
//	              responses of rollout.max_response_tokens: 9 signals
//	              (log-probs, entropies, reference and rollout log-probs,
//	              advantages, advantage bonuses, returns, the token-loss
//	              weights and coefficients) and 2K for the values and head
//	              masks. With shared-memory plugins they live in the
//	              plugins' arena, counted instead: a quarter's headroom
//	              over the columns and the prompts' and responses' token
//	              ids (model.max_len per row), at least 1 MiB, plus one
//	              answer region per plugin (the largest per-token answer,
//	              max(2, K) values a token, with a quarter's headroom, at
//	              least 1 MiB)
//
// It is an estimate of the tensors a run must hold, not of a particular
// engine's allocator: measured peaks are compared with it in docs/config.md
// ("Memory").
func EstimateMemory(cfg *trainer.Config, p xla.ModelConfig, valueHeads, evalRows int) MemoryEstimate {
	f := func(x int) float64 { return float64(x) }
	d, layers, heads, ff, v, t := f(p.DModel), f(p.Layers), f(p.Heads), f(p.FF), f(p.Vocab), f(cfg.Model.MaxLen)
	if ff == 0 {
		ff = 4 * d
	}
	dkv := d // key/value width
	params := ParamCount(p)
	sizeKeys := "model.layers, model.d_model, model.ff, model.max_len, the tokenizer's vocabulary"
	if h := p.HF; h != nil {
		dkv = f(h.KVHeads) * f(h.HeadDim)
		sizeKeys = "model.hf's config.json sizes"
	}
	state := 16 * params
	stateKeys := sizeKeys
	if p.LoRA != nil {
		adapters := LoRAParamCount(p)
		frozen := 4.0
		if p.BaseBF16 {
			frozen = 2
		}
		state = frozen*params + 16*adapters
		stateKeys += ", model.lora (frozen weights, adapters)"
		if p.BaseBF16 {
			stateKeys += ", model.lora.base_dtype (bfloat16)"
		}
		if valueHeads > 0 {
			state += 16 * (adapters + d*f(valueHeads))
			stateKeys += ", the critic's adapters and heads (algorithm, strategies, train.value_heads)"
		}
	} else {
		if valueHeads > 0 {
			state += 16 * (params + d*f(valueHeads))
			stateKeys += ", the critic (algorithm, strategies, train.value_heads)"
		}
		if cfg.Train.KLCoef > 0 {
			state += 4 * params
			stateKeys += ", train.kl_coef (the reference policy)"
		}
	}
	gen := func(rows float64) float64 {
		kv := 2 * layers * 2 * rows * t * dkv * 4
		prefill := rows*t*(4*d+ff)*4 + rows*heads*t*t*4
		logits := rows * v * 4 * 4
		batch := rows * t * 40 // token ids, masks, log-probs and rewards on the host
		return kv + prefill + logits + batch
	}
	rows := f(cfg.Train.PromptsPerStep) * f(cfg.Rollout.N)
	micro := rows / f(max(cfg.Train.Minibatches, 1))
	if cfg.Train.MicroBatchSize > 0 {
		micro = min(micro, f(cfg.Train.MicroBatchSize))
	}
	train := micro*t*(layers*(10*d+2*ff)*4+layers*heads*t*4*2) + micro*t*v*4*3
	trainKeys := ""
	if p.Recompute {
		// Each block's input kept, one block's activations and attention
		// probabilities at a time (recomputed in the backward pass).
		// The head takes the positions in chunks of at most
		// xla.TrainChunkBytes of logits.
		train = micro*t*(layers*d*4+(10*d+2*ff)*4+heads*t*4*2) + min(micro*t*v*4, f(xla.TrainChunkBytes))*3
		trainKeys = ", model.recompute"
	}
	if valueHeads > 0 {
		train *= 2
	}
	e := MemoryEstimate{
		Fixed: []MemoryPart{
			{"runtime", runtimeBytes, "fixed"},
			{"model state", state, stateKeys},
		},
		Passes: []MemoryPart{
			{"training pass", train, fmt.Sprintf("a micro-batch of %.0f rows: train.prompts_per_step x rollout.n = %.0f over train.minibatches, at most train.micro_batch_size; model.max_len, the vocabulary%s", micro, rows, trainKeys)},
		},
	}
	if cfg.Rollout.BF16() {
		e.Fixed = append(e.Fixed, MemoryPart{"bfloat16 copies of the weights", 2 * params, "rollout.dtype (bfloat16), the model's sizes"})
	}
	if xla.IsCPUEngine(cfg.Backend.Engine) {
		// Between their runs the cpu engine's graphs keep the buffers of
		// their last run, those of the graphs not running bounded.
		e.Fixed = append(e.Fixed, MemoryPart{"cpu engine's idle buffers", cpu.IdlePoolBytes, "a bound of the cpu engine, backend.engine"})
	}
	if len(cfg.Rollout.Servers) == 0 {
		// With rollout.servers the batch is generated elsewhere, and its
		// rescoring goes in parts no larger than a training pass.
		genRows, genKeys := rows, fmt.Sprintf("train.prompts_per_step x rollout.n = %.0f rows, model.max_len", rows)
		if mr := f(cfg.Rollout.MaxRows); mr > 0 && mr < rows {
			genRows, genKeys = mr, fmt.Sprintf("rollout.max_rows = %.0f of the %.0f rows at a time, model.max_len", mr, rows)
		}
		e.Passes = append([]MemoryPart{{"generation of a training batch", gen(genRows), genKeys}}, e.Passes...)
	}
	if evalRows > 0 {
		e.Passes = append(e.Passes, MemoryPart{"generation of an evaluation", gen(f(evalRows)),
			fmt.Sprintf("the largest eval set's problems (eval.max_problems) x eval.k, at most eval.max_rows = %d rows, model.max_len", evalRows)})
	}
	tokens := rows * f(cfg.Rollout.MaxResponseTokens)
	columns := tokens * 8 * (9 + 2*f(valueHeads))
	colKeys := "train.prompts_per_step x rollout.n x rollout.max_response_tokens tokens, the value heads"
	if n := shmPlugins(cfg); n > 0 {
		region := func(b float64) float64 { return max(1.25*b, 1<<20) }
		shared := region(columns+8*rows*t) + f(n)*region(tokens*8*max(2, f(valueHeads)))
		e.Fixed = append(e.Fixed, MemoryPart{"per-token columns of a step, in the plugins' shared memory", shared,
			colKeys + fmt.Sprintf(", model.max_len, %d shared-memory plugin(s) (strategies[].plugin, transport)", n)})
	} else {
		e.Fixed = append(e.Fixed, MemoryPart{"per-token columns of a step", columns, colKeys})
	}
	return e
}

// shmPlugins counts the strategies entries that are plugins which may take
// the shared-memory transport (transport not "messages").
func shmPlugins(cfg *trainer.Config) int {
	n := 0
	for _, e := range cfg.Strategies {
		if _, ok := e["plugin"]; ok && e["transport"] != "messages" {
			n++
		}
	}
	return n
}

// ParamCount is the number of parameters of the policy p: for cde's
// transformer the token and position embeddings, per layer the q, k, v,
// o projections, the two feed-forward matrices with their biases and two
// layer norms, then the final norm and the LM head; for a Hugging Face
// model its config.json's architecture (embeddings, attention with
// grouped key/value heads, SwiGLU, norms, the LM head unless tied; the
// biases of Qwen2 and the q/k norms of Qwen3 included).
func ParamCount(p xla.ModelConfig) float64 {
	f := func(x int) float64 { return float64(x) }
	d, layers, v := f(p.DModel), f(p.Layers), f(p.Vocab)
	if h := p.HF; h != nil {
		hd, qd := f(h.HeadDim), f(h.Heads)*f(h.HeadDim)
		kvd := f(h.KVHeads) * hd
		perLayer := d*qd + 2*d*kvd + qd*d + 3*d*f(h.Intermediate) + 2*d
		if h.QKVBias {
			perLayer += qd + 2*kvd
		}
		if h.OBias {
			perLayer += d
		}
		if h.QKNorm {
			perLayer += 2 * hd
		}
		n := v*d + layers*perLayer + d
		if !h.TieEmbeddings {
			n += v * d
		}
		return n
	}
	ff := f(p.FF)
	if ff == 0 {
		ff = 4 * d
	}
	perLayer := 4*d*d + 2*d*ff + ff + d + 4*d
	return v*d + f(p.MaxLen)*d + layers*perLayer + 2*d + d*v
}

// LoRAParamCount is the number of adapter parameters of p's model.lora:
// r (in + out) for each adapted projection of each layer (0 without
// adapters).
func LoRAParamCount(p xla.ModelConfig) float64 {
	h := p.HF
	if p.LoRA == nil || h == nil {
		return 0
	}
	f := func(x int) float64 { return float64(x) }
	d, qd, kvd, ff := f(h.Hidden), f(h.Heads)*f(h.HeadDim), f(h.KVHeads)*f(h.HeadDim), f(h.Intermediate)
	sizes := map[string][2]float64{ // in, out
		"q_proj": {d, qd}, "k_proj": {d, kvd}, "v_proj": {d, kvd}, "o_proj": {qd, d},
		"gate_proj": {d, ff}, "up_proj": {d, ff}, "down_proj": {ff, d},
	}
	var n float64
	for _, m := range p.LoRA.Targets {
		s := sizes[m]
		n += f(p.LoRA.Rank) * (s[0] + s[1])
	}
	return n * f(h.Layers)
}

// MachineMemory is the memory this process may use, in bytes: the
// machine's (MemTotal in /proc/meminfo), or its cgroup's limit when lower;
// 0 when unknown (not Linux).
func MachineMemory() float64 {
	var total float64
	if fh, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				total = kb * 1024
			}
		}
		fh.Close()
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if lim, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && lim > 0 && (total == 0 || lim < total) {
			total = lim
		}
	}
	return total
}

// CheckMemory refuses a run whose estimate exceeds limit bytes (limit <=
// 0: no check), naming the estimate's terms and the key that turns the
// check off.
func CheckMemory(e MemoryEstimate, limit float64, what string) error {
	if limit <= 0 || e.Total() <= limit {
		return nil
	}
	return fmt.Errorf("config: the run's estimated peak memory, %s, is more than %s (%s): reduce the keys named, or set %s (GB; -1: no check; see docs/config.md, \"Memory\")",
		e, gb(limit), what, MemoryLimitEnv)
}

// MemoryMargin is the share of the machine's memory a run's estimate
// leaves to the system and the estimate's error when MemoryLimitEnv is
// unset: 10%.
const MemoryMargin = 0.1

// MemoryLimitEnv names the variable that sets the memory a run may use, in
// GB (decimal): unset or 0 is the machine's (MachineMemory), -1 turns the
// check off.
const MemoryLimitEnv = "CDE_MEMORY_LIMIT_GB"

// MemoryLimit reads MemoryLimitEnv: the limit in bytes (<= 0: no check)
// and what it is, for messages.
func MemoryLimit() (float64, string, error) {
	s := strings.TrimSpace(os.Getenv(MemoryLimitEnv))
	if s == "" || s == "0" {
		m := MachineMemory() * (1 - MemoryMargin)
		return m, fmt.Sprintf("%.0f%% of this machine's memory, or of its cgroup limit", 100*(1-MemoryMargin)), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || (v < 0 && v != -1) {
		return 0, "", fmt.Errorf("%s=%q: want a size in GB, 0 (the machine's memory) or -1 (no check)", MemoryLimitEnv, s)
	}
	if v == -1 {
		return 0, "no check", nil
	}
	return v * 1e9, MemoryLimitEnv, nil
}

// MemoryHelp is the memory paragraph of cde-run train --help, with the estimate
// of the embedded defaults.
func MemoryHelp() string {
	est := "unknown"
	if cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}}); err == nil {
		if e, err := EstimateConfig(cfg); err == nil {
			est = e.String()
		}
	}
	return `
Memory: before it allocates anything, a run estimates its peak memory from
the config (weights, gradients and optimiser state, the largest generation
or training pass: KV caches, activations, logits), logs the estimate, and
refuses to start when it exceeds 90% of this machine's memory (of its
cgroup limit when lower), naming the keys that drive it. ` + MemoryLimitEnv + `=N sets
the limit to N GB, -1 turns the check off. For the embedded defaults:
` + est + `.
Upper bounds of the size keys: docs/config.md ("Memory").
`
}
