package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/tasks"
)

// tinyQwen3 serves a tiny random Qwen3 with the real Qwen3 tokenizer and
// chat template (ChatML), context 64.
func tinyQwen3(t *testing.T) *Model {
	t.Helper()
	dir := t.TempDir()
	if err := hftest.WriteTinyQwen3(dir, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 1, 3); err != nil {
		t.Fatal(err)
	}
	m, err := Load(LoadOptions{Model: dir, Engine: "cpu", Step: -1, MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// idList writes ids as a JSON list.
func idList(ids []int32) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

// The reference token ids below are Hugging Face's (tokenizer/testdata/
// golden_qwen3.json, made with @huggingface/tokenizers): a text prompt
// samples exactly what its token ids do with the same seed, and a chat
// samples exactly what the Jinja2 rendering of the real Qwen3 template,
// tokenized by Hugging Face, does.
func TestTextAndChatPrompts(t *testing.T) {
	m := tinyQwen3(t)
	ts := newTestServer(t, m, Options{})
	const opts = `"max_tokens": 6, "temperature": 0.9, "n": 3, "seed": 11, "logprobs": 1, "return_tokens_as_token_ids": true`
	text := complete(t, ts.URL, `{"prompt": "end.\n\nNext", `+opts+`}`)
	byIDs := complete(t, ts.URL, `{"prompt": [[408, 382, 5847]], `+opts+`}`)
	text.ID, text.Created, byIDs.ID, byIDs.Created = "", 0, "", 0
	if !reflect.DeepEqual(text, byIDs) {
		t.Fatalf("text prompt:\n%+v\ntoken ids:\n%+v", text, byIDs)
	}
	// A list of texts is one prompt each, in order.
	two := complete(t, ts.URL, `{"prompt": ["end.\n\nNext", "a b"], "max_tokens": 2, "seed": 3}`)
	twoIDs := complete(t, ts.URL, `{"prompt": [[408, 382, 5847], [64, 293]], "max_tokens": 2, "seed": 3}`)
	if len(two.Choices) != 2 || two.Choices[0].Text != twoIDs.Choices[0].Text || two.Choices[1].Text != twoIDs.Choices[1].Text ||
		two.Usage != twoIDs.Usage || two.Usage.PromptTokens != 5 {
		t.Fatalf("texts %+v, ids %+v", two, twoIDs)
	}

	chatRef := []int32{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198}
	status, out := post(t, ts.URL, "/v1/chat/completions",
		`{"model": "x", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_completion_tokens": 6, "temperature": 0.9, "n": 3, "seed": 11, "logprobs": true, "top_logprobs": 0}`)
	if status != http.StatusOK {
		t.Fatalf("chat: %d %s", status, out)
	}
	var chat struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			Logprobs *struct {
				Content []struct {
					Token       string  `json:"token"`
					Logprob     float64 `json:"logprob"`
					Bytes       []int   `json:"bytes"`
					TopLogprobs []any   `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
			StopReason   *int   `json:"stop_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&chat); err != nil {
		t.Fatalf("chat response: %v\n%s", err, out)
	}
	ref := complete(t, ts.URL, `{"prompt": [`+idList(chatRef)+`], `+opts+`}`)
	if chat.Object != "chat.completion" || !strings.HasPrefix(chat.ID, "chatcmpl-") || len(chat.Choices) != 3 ||
		chat.Usage.PromptTokens != len(chatRef) || chat.Usage.CompletionTokens != ref.Usage.CompletionTokens {
		t.Fatalf("chat: %s", out)
	}
	for i, c := range chat.Choices {
		r := ref.Choices[i]
		if c.Index != i || c.Message.Role != "assistant" || c.Message.Content != r.Text || c.FinishReason != r.FinishReason {
			t.Fatalf("choice %d: %+v, want the text %q and finish %s of the reference ids", i, c, r.Text, r.FinishReason)
		}
		if len(c.Logprobs.Content) != len(r.Logprobs.TokenLogprobs) {
			t.Fatalf("choice %d: %d log-probs, want %d", i, len(c.Logprobs.Content), len(r.Logprobs.TokenLogprobs))
		}
		for j, lp := range c.Logprobs.Content {
			if lp.Logprob != r.Logprobs.TokenLogprobs[j] {
				t.Fatalf("choice %d token %d: log-prob %v, want %v", i, j, lp.Logprob, r.Logprobs.TokenLogprobs[j])
			}
		}
	}
	// Without max_tokens a reply may fill the context (64 - 16 padded).
	status, out = post(t, ts.URL, "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]}], "seed": 1, "temperature": 5}`)
	if status != http.StatusOK {
		t.Fatalf("chat without max_tokens: %d %s", status, out)
	}
	if err := json.Unmarshal(out, &chat); err != nil || chat.Choices[0].FinishReason == "length" && chat.Usage.CompletionTokens != 48 {
		t.Fatalf("chat without max_tokens: %s", out)
	}
	// vLLM's chat_template_kwargs: enable_thinking false adds Qwen3's
	// empty thinking block (<think> \n\n </think> \n\n, ids 151667, 271,
	// 151668, 271, as its template renders it for enable_thinking=False);
	// true is the template's default.
	noThink := append(append([]int32{}, chatRef...), 151667, 271, 151668, 271)
	for _, c := range []struct {
		kwargs string
		ids    []int32
	}{{`{"enable_thinking": false}`, noThink}, {`{"enable_thinking": true}`, chatRef}} {
		status, out = post(t, ts.URL, "/v1/chat/completions",
			`{"messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 4, "seed": 11, "temperature": 0.9, "chat_template_kwargs": `+c.kwargs+`}`)
		ref := complete(t, ts.URL, `{"prompt": [`+idList(c.ids)+`], "max_tokens": 4, "seed": 11, "temperature": 0.9}`)
		if err := json.Unmarshal(out, &chat); status != http.StatusOK || err != nil || chat.Usage.PromptTokens != len(c.ids) ||
			chat.Choices[0].Message.Content != ref.Choices[0].Text {
			t.Fatalf("chat_template_kwargs %s: %d %s, want %d prompt tokens and the reply %q", c.kwargs, status, out, len(c.ids), ref.Choices[0].Text)
		}
	}
}

// Bad text prompts and chats are 400s naming the field.
func TestTextAndChatErrors(t *testing.T) {
	m := tinyQwen3(t)
	ts := newTestServer(t, m, Options{MaxRows: 4})
	long := strings.Repeat("a b ", 40) // 81 tokens (the last space is one), context 64
	for _, c := range []struct{ path, body, want string }{
		{"/v1/completions", `{"prompt": ""}`, "prompt[0]: empty"},
		{"/v1/completions", `{"prompt": ["a", [1, 2]]}`, "prompt[1]: want a text"},
		{"/v1/completions", `{"prompt": ["a", "b", "c", "d", "e"]}`, "more than 4 prompts"},
		{"/v1/completions", `{"prompt": "` + long + `"}`, "prompt[0]: 81 tokens, more than 63"},
		{"/v1/completions", `{"prompt": "` + strings.Repeat("x", 64*64+1) + `"}`, "4097 bytes, more than 4096"},
		{"/v1/completions", `{"prompt": {"a": 1}}`, "prompt: want a text, a list of texts or a list of token-id lists"},
		{"/v1/chat/completions", `{"messages": []}`, "messages: empty"},
		{"/v1/chat/completions", `{}`, "messages: required"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}`, "messages[1].role: the last message must be the user's"},
		{"/v1/chat/completions", `{"messages": [{"role": "tool", "content": "hi"}]}`, "messages[0].role: want system, user or assistant"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi", "name": "bob"}]}`, "messages[0].name: not supported"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, "messages[0].content[0]: only"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}`, "top_logprobs = 2"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "max_completion_tokens": 4}`, "give one"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": []}`, "tools: not supported"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "prompt": [1]}`, "prompt: not supported"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, "no new token would fit"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]}`, "chat_template_kwargs: want a JSON object"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"tools": 1}}`, "chat_template_kwargs.tools: not supported"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": "no"}}`, "chat_template_kwargs.enable_thinking: want true or false"},
	} {
		status, out := post(t, ts.URL, c.path, c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(out), c.want) {
			t.Errorf("%s %.60s: %d %s, want 400 containing %q", c.path, c.body, status, out, c.want)
		}
	}
	// cde's character model has no chat template: chat is off, text works.
	cm := charModel(t, 1)
	cs := newTestServer(t, cm, Options{})
	if status, out := post(t, cs.URL, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`); status != http.StatusBadRequest ||
		!strings.Contains(string(out), "no chat template") {
		t.Fatalf("chat on the character model: %d %s", status, out)
	}
	// The character tokenizer's prompt: BOS (1) then one id per character,
	// as the trainer encodes a prompt.
	text := complete(t, cs.URL, `{"prompt": "12+3", "max_tokens": 3, "seed": 5}`)
	chars := tasks.NewCharTokenizer().Encode("12+3")
	byIDs := complete(t, cs.URL, `{"prompt": [`+idList(append([]int32{tasks.BosID}, chars...))+`], "max_tokens": 3, "seed": 5}`)
	if text.Choices[0].Text != byIDs.Choices[0].Text || text.Usage != byIDs.Usage || text.Usage.PromptTokens != 5 {
		t.Fatalf("char text %+v, ids %+v", text, byIDs)
	}
}

// A tokenizer larger than the model's vocabulary is warned about at load,
// and a text prompt holding a token past the vocabulary is refused.
func TestTokenizerLargerThanVocab(t *testing.T) {
	var logs bytes.Buffer
	m := &Model{Tokenizer: tasks.NewCharTokenizer(), Vocab: 40, MaxLen: 64, TextBOS: tasks.BosID,
		Template: tasks.ChatTemplate{Name: tasks.ChatNone}}
	m.warn(zerolog.New(&logs))
	if !strings.Contains(logs.String(), "more tokens than the model's vocabulary") || !strings.Contains(logs.String(), `"model_vocab":40`) {
		t.Fatalf("log: %s", logs.String())
	}
	ids := tasks.NewCharTokenizer().Encode("1z")
	hi := ids[1]
	if ids[0] >= 40 || hi < 40 {
		t.Fatalf("'1z' is ids %v: pick characters inside and past the vocabulary", ids)
	}
	_, aerr := encodeText(m, 0, "1z")
	if aerr == nil || !strings.Contains(aerr.msg, fmt.Sprintf("token 2 of its tokenization is id %d, past the model's vocabulary of 40", hi)) {
		t.Fatalf("err %v", aerr)
	}
}

// enable_thinking is Qwen3's alone: another template refuses it by name.
func TestTemplateForNoSwitch(t *testing.T) {
	for _, name := range []string{tasks.ChatML, tasks.ChatLlama3} {
		_, aerr := templateFor(tasks.ChatTemplate{Name: name}, json.RawMessage(`{"enable_thinking": false}`))
		if aerr == nil || aerr.status != http.StatusBadRequest || !strings.Contains(aerr.msg, "("+name+") has no thinking switch") {
			t.Errorf("%s: %+v", name, aerr)
		}
	}
	tpl, aerr := templateFor(tasks.ChatTemplate{Name: tasks.ChatQwen3, EnableThinking: true}, nil)
	if aerr != nil || !tpl.EnableThinking {
		t.Errorf("no kwargs: %+v %+v", tpl, aerr)
	}
}
