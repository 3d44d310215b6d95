package tasks

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatGolden holds the built-in templates equal to the real Qwen3 and
// Llama-3 Instruct templates rendered by Jinja2 (testdata/chat/gen.py).
func TestChatGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "chat", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Template string    `json:"template"`
		Thinking *bool     `json:"enable_thinking"`
		Messages []Message `json:"messages"`
		Text     string    `json:"text"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for i, c := range cases {
		tpl, err := ParseChatTemplate(c.Template)
		if err != nil {
			t.Fatal(err)
		}
		name := c.Template
		if c.Thinking != nil {
			tpl.EnableThinking = *c.Thinking
			name += fmt.Sprintf(" enable_thinking=%v", *c.Thinking)
		}
		if got := tpl.Render(c.Messages); got != c.Text {
			t.Errorf("case %d (%s, %q):\n got %q\nwant %q", i, name, c.Messages, got, c.Text)
		}
		count[name]++
	}
	if count[ChatML] < 10 || count[ChatLlama3] < 10 || count["qwen3 enable_thinking=false"] < 10 || count["qwen3 enable_thinking=true"] < 10 {
		t.Fatalf("golden file too small: %v", count)
	}
}

func TestChatRenderNone(t *testing.T) {
	tpl, _ := ParseChatTemplate(ChatNone)
	for _, c := range []struct {
		msgs []Message
		want string
	}{
		{[]Message{{"user", "Q"}}, "Q"},
		{[]Message{{"system", "S"}, {"user", "Q"}}, "S\n\nQ"},
		{[]Message{{"system", ""}, {"user", " Q "}}, " Q "},
		{nil, ""},
	} {
		if got := tpl.Render(c.msgs); got != c.want {
			t.Errorf("Render(%q) = %q, want %q", c.msgs, got, c.want)
		}
	}
	if tpl.IncludesBOS() {
		t.Error("none includes BOS")
	}
}

func TestParseChatTemplateUnknown(t *testing.T) {
	_, err := ParseChatTemplate("jinja")
	if err == nil || !strings.Contains(err.Error(), `"jinja"`) || !strings.Contains(err.Error(), "chatml, qwen3, llama3, none") {
		t.Fatalf("err = %v", err)
	}
}

func writeTokConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDetectChatTemplate(t *testing.T) {
	llamaLike := "{% for m in messages %}{% if loop.index0 == 0 %}{{ bos_token }}{% endif %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>{% endfor %}"
	for _, c := range []struct {
		name    string
		dir     string
		want    ChatTemplate
		wantErr string
	}{
		{"qwen3", filepath.Join("..", "tokenizer", "testdata", "qwen3"), ChatTemplate{Name: ChatQwen3, EnableThinking: true}, ""},
		{"no config", t.TempDir(), ChatTemplate{Name: ChatNone}, ""},
		{"no template", writeTokConfig(t, map[string]any{"bos_token": "<s>"}), ChatTemplate{Name: ChatNone}, ""},
		{"null template", writeTokConfig(t, map[string]any{"chat_template": nil}), ChatTemplate{Name: ChatNone}, ""},
		{"llama3-like", writeTokConfig(t, map[string]any{"chat_template": llamaLike, "bos_token": "<|begin_of_text|>"}),
			ChatTemplate{Name: ChatLlama3, BOS: "<|begin_of_text|>"}, ""},
		{"bos object", writeTokConfig(t, map[string]any{"chat_template": llamaLike, "bos_token": map[string]any{"content": "<B>"}}),
			ChatTemplate{Name: ChatLlama3, BOS: "<B>"}, ""},
		{"named list", writeTokConfig(t, map[string]any{"chat_template": []any{
			map[string]any{"name": "tool_use", "template": "x"},
			map[string]any{"name": "default", "template": "<|im_start|>{{ m }}"}}}), ChatTemplate{Name: ChatML}, ""},
		{"named list without default", writeTokConfig(t, map[string]any{"chat_template": []any{map[string]any{"name": "rag", "template": "x"}}}),
			ChatTemplate{}, `no template named "default"`},
		{"qwen2.5 default system", writeTokConfig(t, map[string]any{"chat_template": "{{ '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud.' }}"}),
			ChatTemplate{}, "default system prompt"},
		{"llama3.1 date", writeTokConfig(t, map[string]any{"chat_template": llamaLike + "Cutting Knowledge Date: December 2023", "bos_token": "<|begin_of_text|>"}),
			ChatTemplate{}, "dated system block"},
		{"llama3 without bos", writeTokConfig(t, map[string]any{"chat_template": llamaLike}), ChatTemplate{}, "names none"},
		{"mistral", writeTokConfig(t, map[string]any{"chat_template": "{{ bos_token }}[INST] {{ m }} [/INST]"}), ChatTemplate{}, "not one cde recognises"},
		{"bad json", writeTokConfig(t, map[string]any{"chat_template": 7}), ChatTemplate{}, "neither a string nor a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DetectChatTemplate(c.dir)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "tokenizer_config.json") {
					t.Fatalf("err = %v, want one naming the file and containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// TestDetectLlama3 detects the real Llama-3 Instruct template (installed by
// npm; see tokenizer/testdata/gen).
func TestDetectLlama3(t *testing.T) {
	dir := filepath.Join("..", "tokenizer", "testdata", "gen", "node_modules", "@lenml", "tokenizer-llama3", "models")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip("run `npm ci` in tokenizer/testdata/gen: ", err)
	}
	got, err := DetectChatTemplate(dir)
	if err != nil || got != (ChatTemplate{Name: ChatLlama3, BOS: "<|begin_of_text|>"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
}
