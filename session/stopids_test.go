package session_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// Training stops where transformers and vLLM do: generation_config.json's
// eos ids, else config.json's, else the tokenizer's eos_token, logged at
// start.
func TestStopIDsHFRule(t *testing.T) {
	model := tinyQwen3(t) // config.json eos_token_id 151645, tokenizer eos <|im_end|> = 151645
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(`{"question": "A box holds 12 eggs. How many eggs are in 4 boxes?", "answer": "#### 48"}`+"\n"), 0o644)
	for _, tc := range []struct {
		name, generation string // "" = no generation_config.json
		want             []int32
		from             string
	}{
		{"config.json", "", []int32{151645}, "config.json eos_token_id"},
		{"generation_config.json", `{"eos_token_id": [151645, 151643]}`, []int32{151645, 151643}, "generation_config.json eos_token_id"},
	} {
		os.Remove(filepath.Join(model, "generation_config.json"))
		if tc.generation != "" {
			os.WriteFile(filepath.Join(model, "generation_config.json"), []byte(tc.generation), 0o644)
		}
		cfg, err := trainer.LoadConfig(trainer.LoadOptions{Layers: [][]byte{[]byte(`seed: 1
task: {name: math, train: ` + filepath.Join(data, "train.jsonl") + `, tokenizer: ` + model + `}
model: {hf: ` + model + `, max_len: 128, checkpoint: ""}
rollout: {n: 2, max_response_tokens: 8}
train: {steps: 1, prompts_per_step: 1}
eval: {every: 0, k: 1, at_start: false}
`)}})
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		s, err := session.New(cfg, zerolog.New(&log))
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if !slices.Equal(s.Trainer.StopTokens, tc.want) {
			t.Errorf("%s: stop tokens %v, want %v", tc.name, s.Trainer.StopTokens, tc.want)
		}
		if !strings.Contains(log.String(), `"from":"`+tc.from+`"`) || !strings.Contains(log.String(), `"message":"stop tokens"`) {
			t.Errorf("%s: the log does not say where the stop ids came from:\n%s", tc.name, log.String())
		}
	}
}
