package xla

import (
	"errors"
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// HFModel is a Hugging Face checkpoint (Llama, Qwen2, Qwen3, Mistral)
// loaded for scoring: `cde-run score`.
type HFModel struct {
	Config *hf.Config
	Dir    string
	engine compute.Backend
	ctx    *model.Scope
	execs  map[int]*model.Exec // by padded length
}

// scoreBucket rounds sequence lengths up, so a stream of different lengths
// compiles few graphs.
const scoreBucket = 64

// LoadHF reads dir's config.json and weights (model.safetensors, or the
// shards model.safetensors.index.json lists) onto the engine (see
// NewEngine; pjrtPlugin is backend.pjrt_plugin for the xla:* engines).
func LoadHF(dir, engine, pjrtPlugin string) (*HFModel, error) {
	return LoadHFAdapter(dir, "", engine, pjrtPlugin)
}

// LoadHFAdapter is LoadHF with the PEFT LoRA adapter in adapterDir ("" =
// none) merged into the weights: W' = W + (lora_alpha / r) B A, summed in
// float64 and rounded once to float32.
func LoadHFAdapter(dir, adapterDir, engine, pjrtPlugin string) (*HFModel, error) {
	c, err := hf.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	var ad *peft.Adapter
	if adapterDir != "" {
		if ad, err = peft.Read(adapterDir); err != nil {
			return nil, err
		}
		if err := checkAdapterModules(HFModelConfig(c, 2), ad); err != nil {
			return nil, fmt.Errorf("%s: %w", adapterDir, err)
		}
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	eng, err := NewEngine(engine, pjrtPlugin)
	if err != nil {
		return nil, err
	}
	ctx := model.NewStore().RootScope()
	if err := loadHFParams(ctx, eng, c, set, true, ad, false); err != nil {
		eng.Finalize()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &HFModel{Config: c, Dir: dir, engine: eng, ctx: ctx, execs: map[int]*model.Exec{}}, nil
}

// Close releases the engine.
func (m *HFModel) Close() { m.engine.Finalize() }

// LogProbs returns, for j = from .. len(seq)-1, log p(seq[j] | seq[:j]) at
// temperature 1: the log-probs of the tokens seq[from:] given what comes
// before them. from must be >= 1 (the first token has no context).
func (m *HFModel) LogProbs(seq []int32, from int) ([]float32, error) {
	if from < 1 || from > len(seq) {
		return nil, fmt.Errorf("score from token %d of %d: want 1 <= from <= length", from, len(seq))
	}
	if len(seq) > m.Config.MaxPositions {
		return nil, fmt.Errorf("%d tokens: over max_position_embeddings = %d", len(seq), m.Config.MaxPositions)
	}
	for i, id := range seq {
		if id < 0 || int(id) >= m.Config.Vocab {
			return nil, fmt.Errorf("token %d: id %d outside the model's vocabulary of %d", i, id, m.Config.Vocab)
		}
	}
	t := min((len(seq)+scoreBucket-1)/scoreBucket*scoreBucket, m.Config.MaxPositions)
	tokens := make([]int32, t)
	targets := make([]int32, t)
	copy(tokens, seq)
	copy(targets, seq[1:])
	e, ok := m.execs[t]
	if !ok {
		arch := newHFArch(m.Config, t)
		var err error
		e, err = model.NewExec(m.engine, m.ctx.Store(), func(ctx *model.Scope, tok, tgt *graph.Node) *graph.Node {
			lp := graph.LogSoftmax(arch.logits(ctx, arch.hidden(ctx, tok)), -1)
			tlp, _ := tokenLogProbs(lp, tgt)
			return tlp
		})
		if err != nil {
			return nil, err
		}
		m.execs[t] = e
	}
	out, err := run(e, tensors.FromFlatDataAndDimensions(tokens, 1, t), tensors.FromFlatDataAndDimensions(targets, 1, t))
	if err != nil {
		return nil, err
	}
	all := out[0].Value().([][]float32)[0]
	// all[j] = log p(seq[j+1] | seq[:j+1]).
	return append([]float32(nil), all[from-1:len(seq)-1]...), nil
}

// HFScore is one scored pair: the prompt and response token ids (tokenized
// separately, no special tokens added) and log p(response_ids[j] |
// prompt_ids ++ response_ids[:j]) at temperature 1.
type HFScore struct {
	PromptIDs   []int32   `json:"prompt_ids"`
	ResponseIDs []int32   `json:"response_ids"`
	LogProbs    []float32 `json:"logprobs"`
}

// Score tokenizes prompt and response with encode and scores the response.
// The prompt must give at least one token.
func (m *HFModel) Score(encode func(string) []int32, prompt, response string) (HFScore, error) {
	r := HFScore{PromptIDs: encode(prompt), ResponseIDs: encode(response)}
	if len(r.PromptIDs) == 0 {
		return r, errors.New("the prompt gives no tokens: the first response token would have no context")
	}
	seq := append(append([]int32{}, r.PromptIDs...), r.ResponseIDs...)
	var err error
	r.LogProbs, err = m.LogProbs(seq, len(r.PromptIDs))
	return r, err
}
