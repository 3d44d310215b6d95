package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
)

// readChat reads and checks a chat completions body: messages rendered
// with the model's chat template and tokenized as Hugging Face tokenizes a
// rendered chat (no BOS beyond what the template writes), then the same
// fields as a completions request. max_completion_tokens is max_tokens'
// newer name; without either, a reply may fill the model's context (as
// vLLM does). logprobs is a flag here; top_logprobs must be 0.
func readChat(r io.Reader, m *Model, o Options) (*completionRequest, *apiError) {
	why := fmt.Sprintf("a chat completions request can need (%d bytes of JSON per position of the model's max length %d for the messages, and 1 MiB for the other fields)",
		8*MaxTextBytesPerToken, m.MaxLen)
	b := newBodyReader(r, limitWhy(why, chatBodyLimit(m, o), o))
	var msgs json.RawMessage
	f, aerr := b.object("messages", func() *apiError {
		if err := b.dec.Decode(&msgs); err != nil {
			return b.fail("messages", err)
		}
		return nil
	}, MaxTextBytesPerToken*m.MaxLen, textWhy(m))
	if aerr != nil {
		return nil, aerr
	}
	if msgs != nil {
		if path := repeatedKey(msgs, "messages"); path != "" {
			return nil, duplicateKey(path)
		}
		f["messages"] = msgs
	}
	raw := value(f, "messages")
	if raw == nil {
		return nil, badRequest("messages: required (a list of {role, content})")
	}
	chat, aerr := readMessages(raw)
	if aerr != nil {
		return nil, aerr
	}
	tpl, aerr := templateFor(m.Template, value(f, "chat_template_kwargs"))
	if aerr != nil {
		return nil, aerr
	}
	delete(f, "chat_template_kwargs")
	ids, aerr := encodeWith(m, "messages (rendered with the chat template)", tpl.Render(chat), -1)
	if aerr != nil {
		return nil, aerr
	}
	delete(f, "messages")
	if mct := value(f, "max_completion_tokens"); mct != nil {
		if mt := value(f, "max_tokens"); mt != nil && !bytes.Equal(mt, mct) {
			return nil, badRequest("max_tokens = %s and max_completion_tokens = %s: give one (max_completion_tokens is the newer name)", short(mt), short(mct))
		}
		f["max_tokens"] = mct
	}
	delete(f, "max_completion_tokens")
	if value(f, "max_tokens") == nil {
		padded := (len(ids) + 3) / 4 * 4
		f["max_tokens"] = json.RawMessage(fmt.Sprint(max(1, m.MaxLen-padded)))
	}
	if lp := value(f, "logprobs"); lp != nil {
		var on bool
		if json.Unmarshal(lp, &on) != nil {
			return nil, badRequest("logprobs: want true or false, got %s", short(lp))
		}
		if on {
			f["logprobs"] = json.RawMessage("1")
		} else {
			delete(f, "logprobs")
		}
	}
	if tl := value(f, "top_logprobs"); tl != nil {
		if k, ok := asInt(tl); !ok || k != 0 {
			return nil, badRequest("top_logprobs = %s: want 0 (the sampled tokens' log-probs only; alternatives are not supported)", short(tl))
		}
	}
	delete(f, "top_logprobs")
	return checkCompletion(f, chatFields, [][]int32{ids}, m, o)
}

// readMessages reads a chat: system, user and assistant messages whose
// content is a text (or a list of text parts), the last one the user's.
func readMessages(raw json.RawMessage) ([]tasks.Message, *apiError) {
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("messages: want a list of {role, content} objects (%v)", err)
	}
	if len(items) == 0 {
		return nil, badRequest("messages: empty")
	}
	msgs := make([]tasks.Message, len(items))
	for i, it := range items {
		for k := range it {
			if k != "role" && k != "content" {
				return nil, badRequest("messages[%d].%s: not supported (a message takes role and content)", i, k)
			}
		}
		var role string
		if json.Unmarshal(it["role"], &role) != nil || (role != "system" && role != "user" && role != "assistant") {
			return nil, badRequest("messages[%d].role: want system, user or assistant, got %s", i, short(it["role"]))
		}
		text, aerr := messageText(it["content"], i)
		if aerr != nil {
			return nil, aerr
		}
		msgs[i] = tasks.Message{Role: role, Content: text}
	}
	if last := msgs[len(msgs)-1].Role; last != "user" {
		return nil, badRequest("messages[%d].role: the last message must be the user's, got %s (continuing a reply is not supported)", len(msgs)-1, last)
	}
	return msgs, nil
}

// messageText is a message's content: a string, or a list of
// {"type": "text", "text": ...} parts joined.
func messageText(raw json.RawMessage, i int) (string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", badRequest("messages[%d].content: want a text or a list of text parts, got %s", i, short(raw))
	}
	var b bytes.Buffer
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", badRequest("messages[%d].content[%d]: only {\"type\": \"text\", \"text\": ...} parts are supported", i, j)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// The chat response, field for field as vLLM writes it.
type (
	chatResponse struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []chatChoice `json:"choices"`
		Usage   usage        `json:"usage"`
	}
	chatChoice struct {
		Index        int           `json:"index"`
		Message      chatMessage   `json:"message"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason string        `json:"finish_reason"`
		StopReason   *int32        `json:"stop_reason"`
	}
	chatMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	chatLogprobs struct {
		Content []chatTokenLogprob `json:"content"`
	}
	chatTokenLogprob struct {
		Token       string  `json:"token"`
		Logprob     float64 `json:"logprob"`
		Bytes       []int   `json:"bytes"`
		TopLogprobs []any   `json:"top_logprobs"`
	}
)

// chatResponse builds the answer of a chat request from its completions
// answer: the same texts, stop reasons and log-probs, as chat messages.
func (s *Server) chatResponse(req *completionRequest, gens []core.Generation) chatResponse {
	c := s.response(req, gens)
	resp := chatResponse{ID: "chatcmpl-" + randomHex(12), Object: "chat.completion", Created: time.Now().Unix(),
		Model: c.Model, Choices: make([]chatChoice, len(c.Choices)), Usage: c.Usage}
	for i, ch := range c.Choices {
		cc := chatChoice{Index: ch.Index, Message: chatMessage{Role: "assistant", Content: ch.Text},
			FinishReason: ch.FinishReason, StopReason: ch.StopReason}
		if ch.Logprobs != nil {
			cc.Logprobs = &chatLogprobs{Content: make([]chatTokenLogprob, len(ch.Logprobs.Tokens))}
			for j, tok := range ch.Logprobs.Tokens {
				b := []int{}
				piece := s.m.Tokenizer.Decode([]int32{gens[i].Tokens[j]})
				if utf8.ValidString(piece) {
					for _, x := range []byte(piece) {
						b = append(b, int(x))
					}
				}
				cc.Logprobs.Content[j] = chatTokenLogprob{Token: tok, Logprob: ch.Logprobs.TokenLogprobs[j], Bytes: b, TopLogprobs: []any{}}
			}
		}
		resp.Choices[i] = cc
	}
	return resp
}

// templateFor is the model's template with a request's chat_template_kwargs
// applied (vLLM's field): only enable_thinking, and only for a template
// with Qwen3's thinking switch. Without the field the model's own setting
// holds (for a Hugging Face model directory, the template's default,
// thinking on; for a run, its task.enable_thinking).
func templateFor(tpl tasks.ChatTemplate, raw json.RawMessage) (tasks.ChatTemplate, *apiError) {
	if raw == nil {
		return tpl, nil
	}
	var kw map[string]json.RawMessage
	if json.Unmarshal(raw, &kw) != nil || kw == nil {
		return tpl, badRequest("chat_template_kwargs: want a JSON object, got %s", short(raw))
	}
	for k, v := range kw {
		if k != "enable_thinking" {
			return tpl, badRequest("chat_template_kwargs.%s: not supported (cde renders built-in templates; only enable_thinking is)", k)
		}
		var on bool
		if json.Unmarshal(v, &on) != nil {
			return tpl, badRequest("chat_template_kwargs.enable_thinking: want true or false, got %s", short(v))
		}
		if tpl.Name != tasks.ChatQwen3 {
			return tpl, badRequest("chat_template_kwargs.enable_thinking: the model's chat template (%s) has no thinking switch", tpl.Name)
		}
		tpl.EnableThinking = on
	}
	return tpl, nil
}
