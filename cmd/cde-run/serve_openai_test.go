package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/rollout"
)

// TestOpenAIClient drives `cde-run serve` with an independent client, the
// openai npm package (serve/testdata/openai-client), as an ordinary
// OpenAI user would: a text completion, a token-id completion, a chat
// completion and a refused request; beside it, the trainer's own token-id
// client (rollout) samples from the same server. The references are
// Hugging Face's token ids (tokenizer/testdata/golden_qwen3.json): the
// text prompt must sample what its ids do, and the chat what the ids of
// the real Qwen3 template's rendering do. It may skip only outside CI,
// when node or the client's node_modules (npm ci) is missing.
func TestOpenAIClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "serve", "testdata", "openai-client"))
	if err != nil {
		t.Fatal(err)
	}
	needNodeModules(t, dir, "openai")
	model := t.TempDir()
	if err := hftest.WriteTinyQwen3(model, filepath.Join("..", "..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	url, _, stderr := startServe(t, "--model", model, "--engine", "cpu", "--max-len", "64", "--name", "tiny")

	node := exec.Command("node", filepath.Join(dir, "client.mjs"), url, "tiny")
	out, err := node.Output()
	if err != nil {
		ee, _ := err.(*exec.ExitError)
		t.Fatalf("client.mjs: %v\n%s\nserver:\n%s", err, stderrOf(ee), stderr.String())
	}
	type completion struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs struct {
				TokenLogprobs []float64 `json:"token_logprobs"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	var got struct {
		Text, IDs completion
		Chat      struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				Logprobs struct {
					Content []struct {
						Logprob float64 `json:"logprob"`
					} `json:"content"`
				} `json:"logprobs"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		Refused *struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
		}
		Models []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	t.Logf("openai client: text %q, chat %q", got.Text.Choices[0].Text, got.Chat.Choices[0].Message.Content)

	// The text prompt and Hugging Face's ids for it sample the same.
	if len(got.Text.Choices) != 1 || got.Text.Usage.PromptTokens != 3 || !equalJSON(t, got.Text, got.IDs) {
		t.Fatalf("text completion %+v, token-id completion %+v", got.Text, got.IDs)
	}
	// The chat samples what the ids of its Hugging Face rendering do.
	chatRef := `[151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198]`
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": `+chatRef+`, "max_tokens": 6, "temperature": 0.9, "seed": 11, "logprobs": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	var ref completion
	err = json.NewDecoder(resp.Body).Decode(&ref)
	resp.Body.Close()
	if err != nil || len(ref.Choices) != 1 {
		t.Fatalf("reference completion: %v %+v", err, ref)
	}
	c := got.Chat.Choices[0]
	if got.Chat.Object != "chat.completion" || got.Chat.Usage.PromptTokens != 15 || c.Message.Role != "assistant" ||
		c.Message.Content != ref.Choices[0].Text || c.FinishReason != ref.Choices[0].FinishReason ||
		len(c.Logprobs.Content) != len(ref.Choices[0].Logprobs.TokenLogprobs) {
		t.Fatalf("chat %+v, reference %+v", got.Chat, ref)
	}
	for j, lp := range c.Logprobs.Content {
		if lp.Logprob != ref.Choices[0].Logprobs.TokenLogprobs[j] {
			t.Fatalf("chat token %d: log-prob %v, reference %v", j, lp.Logprob, ref.Choices[0].Logprobs.TokenLogprobs[j])
		}
	}
	if got.Refused == nil || got.Refused.Status != 400 || !strings.Contains(got.Refused.Message, "tools") {
		t.Fatalf("a chat with tools: %+v, want a 400 naming tools", got.Refused)
	}
	if len(got.Models) != 1 || got.Models[0] != "tiny" {
		t.Fatalf("models %v", got.Models)
	}

	// The trainer's token-id client on the same server.
	rc, err := rollout.New(rollout.Options{Servers: []string{url}, EOS: 151645, Vocab: hftest.Qwen3Vocab})
	if err != nil {
		t.Fatal(err)
	}
	gens, err := rc.Generate(core.GenerateRequest{Prompts: [][]int32{{408, 382, 5847}, {408, 382, 5847}}, Temperature: 0.9, MaxTokens: 6, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gens {
		if len(g.Tokens) == 0 || len(g.Tokens) > 6 || len(g.LogProbs) != len(g.Tokens) {
			t.Fatalf("rollout generation %d: %+v", i, g)
		}
		for _, lp := range g.LogProbs {
			if !(lp <= 0) || math.IsInf(lp, 0) {
				t.Fatalf("rollout generation %d: log-probs %v", i, g.LogProbs)
			}
		}
	}
}

// equalJSON reports whether a and b marshal to the same JSON.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(ja, jb)
}

func stderrOf(ee *exec.ExitError) string {
	if ee == nil {
		return ""
	}
	return string(ee.Stderr)
}
