package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Message is one chat message: a role ("system", "user", "assistant") and
// its text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Chat template names accepted by ParseChatTemplate.
const (
	// ChatNone joins the message texts with a blank line, no markup.
	ChatNone = "none"
	// ChatML is the Qwen2/Qwen3 format:
	//
	//	<|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
	ChatML = "chatml"
	// ChatLlama3 is the Llama-3 Instruct format:
	//
	//	{bos}<|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>
	//	... <|start_header_id|>assistant<|end_header_id|>\n\n
	ChatLlama3 = "llama3"
	// ChatQwen3 is ChatML with Qwen3's thinking switch: with
	// EnableThinking false the generation prompt is followed by an empty
	// thinking block, "<think>\n\n</think>\n\n", as Qwen3's template
	// writes for enable_thinking=False (the model then answers without
	// reasoning first).
	ChatQwen3 = "qwen3"
)

// ChatTemplateNames lists the built-in templates.
var ChatTemplateNames = []string{ChatML, ChatQwen3, ChatLlama3, ChatNone}

// ChatTemplate renders a conversation as the prompt text a chat model was
// trained on, ending with the generation prompt (the opening of the
// assistant's turn). It is one of the built-in templates (ChatML,
// ChatLlama3, ChatNone), chosen by name or detected from a model's
// tokenizer_config.json; cde has no Jinja engine, so a template is
// recognised, never interpreted, and one it does not recognise is an error.
type ChatTemplate struct {
	// Name is ChatML, ChatLlama3 or ChatNone.
	Name string
	// BOS is the text of the beginning-of-sequence token that ChatLlama3
	// writes first, as the Llama-3 template does with bos_token
	// ("<|begin_of_text|>"); empty for the other templates.
	BOS string
	// EnableThinking is Qwen3's enable_thinking (ChatQwen3 only): true,
	// the template's own default, leaves the generation prompt open for
	// the model's reasoning; false closes an empty thinking block first.
	// The math task sets it from task.enable_thinking (default false).
	EnableThinking bool
}

// ParseChatTemplate returns the built-in template called name.
func ParseChatTemplate(name string) (ChatTemplate, error) {
	switch name {
	case ChatML, ChatNone:
		return ChatTemplate{Name: name}, nil
	case ChatQwen3:
		return ChatTemplate{Name: name, EnableThinking: true}, nil
	case ChatLlama3:
		return ChatTemplate{Name: name, BOS: "<|begin_of_text|>"}, nil
	}
	return ChatTemplate{}, fmt.Errorf("unknown chat template %q (known: %s)", name, strings.Join(ChatTemplateNames, ", "))
}

// Render writes msgs in the template, followed by the generation prompt.
// An empty system message is left out. The result equals what Hugging Face
// transformers' apply_chat_template(msgs, tokenize=False,
// add_generation_prompt=True) renders with the real Qwen2/Qwen3 (chatml) or
// Llama-3 Instruct (llama3) template for plain system and user messages
// (tasks/testdata/chat holds renderings made with Jinja2 from the real
// templates).
func (c ChatTemplate) Render(msgs []Message) string {
	var b strings.Builder
	switch c.Name {
	case ChatML, ChatQwen3:
		for _, m := range msgs {
			if m.Role == "system" && m.Content == "" {
				continue
			}
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
		b.WriteString("<|im_start|>assistant\n")
		if c.Name == ChatQwen3 && !c.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	case ChatLlama3:
		b.WriteString(c.BOS)
		for _, m := range msgs {
			if m.Role == "system" && m.Content == "" {
				continue
			}
			b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimFunc(m.Content, pyIsSpace) + "<|eot_id|>")
		}
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	default:
		first := true
		for _, m := range msgs {
			if m.Content == "" && m.Role == "system" {
				continue
			}
			if !first {
				b.WriteString("\n\n")
			}
			b.WriteString(m.Content)
			first = false
		}
	}
	return b.String()
}

// pyIsSpace is Python's str.isspace for one character, which Jinja's trim
// filter strips: Go's unicode.IsSpace plus the separators U+001C..U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || 0x1c <= r && r <= 0x1f }

// IncludesBOS reports whether Render writes the BOS token itself, so that
// the prompt must not get another one.
func (c ChatTemplate) IncludesBOS() bool { return c.BOS != "" }

// DetectChatTemplate recognises the chat_template of dir/tokenizer_config.json:
// the Qwen2/Qwen3 ChatML template (it writes "<|im_start|>"; ChatQwen3 when
// it reads enable_thinking, with the template's default, thinking on) and the Llama-3
// Instruct template (it writes "<|start_header_id|>"). A file without
// tokenizer_config.json or without a chat_template (a base model) gives
// ChatNone. A template it does not recognise, or one whose rendering of a
// plain conversation would differ from the built-in one (a default system
// prompt such as Qwen2.5's, the date block of Llama-3.1 and later), is an
// error naming the file; set the template by name instead.
func DetectChatTemplate(dir string) (ChatTemplate, error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ChatTemplate{Name: ChatNone}, nil
	}
	if err != nil {
		return ChatTemplate{}, err
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return ChatTemplate{}, fmt.Errorf("%s: %v", path, err)
	}
	var src string
	if len(cfg.ChatTemplate) > 0 && string(cfg.ChatTemplate) != "null" {
		if err := json.Unmarshal(cfg.ChatTemplate, &src); err != nil {
			// A list of named templates ([{name, template}]) takes the "default" one.
			var named []struct{ Name, Template string }
			if json.Unmarshal(cfg.ChatTemplate, &named) != nil {
				return ChatTemplate{}, fmt.Errorf("%s: chat_template is neither a string nor a list of {name, template}", path)
			}
			for _, n := range named {
				if n.Name == "default" {
					src = n.Template
				}
			}
			if src == "" {
				return ChatTemplate{}, fmt.Errorf("%s: chat_template lists no template named \"default\"", path)
			}
		}
	}
	return detectTemplate(src, tokenText(cfg.BOS), path)
}

// tokenText reads a tokenizer_config.json token entry: a string, or an
// object with "content"; "" when absent.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

func detectTemplate(src, bos, path string) (ChatTemplate, error) {
	if strings.TrimSpace(src) == "" {
		return ChatTemplate{Name: ChatNone}, nil
	}
	fail := func(why string) (ChatTemplate, error) {
		return ChatTemplate{}, fmt.Errorf("%s: chat_template %s; set task.chat_template to one of %s to choose a built-in template",
			path, why, strings.Join(ChatTemplateNames, ", "))
	}
	chatml := strings.Contains(src, "<|im_start|>")
	llama := strings.Contains(src, "<|start_header_id|>")
	switch {
	case chatml && llama:
		return fail("mixes ChatML and Llama-3 markup")
	case chatml:
		if strings.Contains(src, "You are Qwen") || strings.Contains(src, "You are a helpful assistant") {
			return fail("writes a default system prompt (as Qwen2.5's does), which the built-in chatml template does not")
		}
		if strings.Contains(src, "enable_thinking") {
			return ChatTemplate{Name: ChatQwen3, EnableThinking: true}, nil
		}
		return ChatTemplate{Name: ChatML}, nil
	case llama:
		if strings.Contains(src, "Cutting Knowledge Date") || strings.Contains(src, "Today Date") {
			return fail("writes a dated system block (Llama-3.1 and later), which the built-in llama3 template does not")
		}
		if !strings.Contains(src, "bos_token") {
			return fail("is Llama-3 markup without bos_token")
		}
		if bos == "" {
			return fail("uses bos_token, but tokenizer_config.json names none")
		}
		return ChatTemplate{Name: ChatLlama3, BOS: bos}, nil
	}
	return fail("is not one cde recognises (ChatML with <|im_start|>, Llama-3 with <|start_header_id|>)")
}
