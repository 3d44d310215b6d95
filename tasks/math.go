package tasks

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tokenizer"
)

// Math is the "math" task: free-form math problems read from GSM8K-style
// or MATH-style JSONL, or verl-style parquet, rendered with a chat template
// and checked by MathVerifier.
//
// Config keys (docs/config.md and docs/math.md):
//
//	train             training file (required)
//	eval              list of {name, path} eval files        default none
//	format            auto | jsonl | parquet                 default auto (by extension)
//	prompt_key        prompt field, dotted for nested        default auto
//	answer_key        answer field, dotted for nested        default auto
//	tokenizer         "char" or a model directory holding    default char
//	                  tokenizer.json (tokenizer_config.json)
//	chat_template     auto | chatml | qwen3 | llama3 | none  default auto
//	enable_thinking   Qwen3's thinking switch (qwen3 only)   default false
//	system_prompt     system message ("" for none)           default ""
//	prompt_template   "", "dapo" or text holding {problem}   default ""
//	                  once: wraps the last user message (an
//	                  eval entry may set its own)
//	prompt_suffix     text appended to the last user message default ""
//	eos_token         token that ends a response (text)      default the tokenizer's
//	correct_reward    reward of a correct answer             default 1
//	incorrect_reward  reward of a wrong or missing answer    default -1
//
// chat_template auto reads the model directory's tokenizer_config.json
// (DetectChatTemplate); with the character tokenizer it is none.
// enable_thinking false (the default, for RLVR on prompts that ask for no
// reasoning block) renders Qwen3's empty thinking block after the
// generation prompt, as its template does for enable_thinking=False; true
// leaves the prompt open for the model's reasoning. Set true with a
// template other than qwen3 is an error.
type Math struct {
	Train    []core.Problem
	evals    []core.EvalSet
	tok      core.Tokenizer
	template ChatTemplate
	verifier MathVerifier
}

var (
	_ core.Task        = (*Math)(nil)
	_ core.TrainLister = (*Math)(nil)
)

// PromptTemplates are the named values of the math task's prompt_template.
// "dapo" is the prompt of DAPO (Yu et al. 2025; its DAPO-Math-17K rows
// carry it) that the CDE paper trains and evaluates with (its appendix
// "Prompt"): the answer goes on a last line "Answer: ...", which the math
// verifier reads.
var PromptTemplates = map[string]string{
	"dapo": "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer " +
		"(without quotes) where $Answer is the answer to the problem.\n\n{problem}\n\nRemember to put your answer on its own line after \"Answer:\".",
}

// mathSource is a file to read: its config key (for errors), path and
// prompt template (the text, "" for none).
type mathSource struct{ key, name, path, tpl string }

// promptTemplate reads p's prompt_template: a name of PromptTemplates, a
// text holding {problem} once, or "" (none); def when absent. It returns
// the text.
func promptTemplate(p *core.Params, def string) string {
	v := p.String("prompt_template", def)
	if named, ok := PromptTemplates[v]; ok {
		v = named
	}
	p.Check(v == "" || strings.Count(v, "{problem}") == 1, "prompt_template",
		`want "", a name (%s) or a text holding {problem} once, got %q`, strings.Join(slices.Sorted(maps.Keys(PromptTemplates)), ", "), v)
	return v
}

// NewMath builds the math task from p. It does not call p.Finish; New does.
func NewMath(p *core.Params) (*Math, error) {
	t := &Math{}
	train := p.String("train", "")
	p.Check(p.Has("train") && train != "", "train", "required (a JSONL or parquet file of training problems)")
	format := p.String("format", "auto")
	p.Check(format == "auto" || format == FormatJSONL || format == FormatParquet, "format", "want auto, jsonl or parquet, got %q", format)
	keys := MathKeys{Prompt: p.String("prompt_key", ""), Answer: p.String("answer_key", "")}
	tokName := p.String("tokenizer", "char")
	p.Check(tokName != "", "tokenizer", `want "char" or a model directory`)
	tplName := p.String("chat_template", "auto")
	thinking := p.Bool("enable_thinking", false)
	system := p.String("system_prompt", "")
	suffix := p.String("prompt_suffix", "")
	tplText := promptTemplate(p, "")
	eosText := p.String("eos_token", "")
	p.Check(len(system)+len(suffix)+len(tplText) <= MaxPromptBytes, "system_prompt", "with prompt_suffix and prompt_template over the limit of %d bytes", MaxPromptBytes)
	rw := readRewards(p)
	t.verifier = MathVerifier{CorrectReward: rw.CorrectReward, IncorrectReward: rw.IncorrectReward}
	subs, _ := readMaps(p, "eval")
	if err := p.Err(); err != nil {
		return nil, err
	}
	var evals []mathSource
	seen := map[string]bool{}
	for i, sp := range subs {
		e := mathSource{key: fmt.Sprintf("%s[%d].path", keyPath(p, "eval"), i), name: sp.String("name", ""), path: sp.String("path", ""),
			tpl: promptTemplate(sp, tplText)}
		sp.Check(e.name != "", "name", "required")
		sp.Check(!seen[e.name], "name", "duplicate eval set name %q", e.name)
		seen[e.name] = true
		sp.Check(e.path != "", "path", "required")
		if err := sp.Finish(); err != nil {
			return nil, err
		}
		evals = append(evals, e)
	}

	// Tokenizer and template.
	var err error
	if t.tok, t.template, err = mathTokenizer(p, tokName, tplName, eosText, thinking); err != nil {
		return nil, err
	}

	load := func(src mathSource) ([]core.Problem, error) {
		f := format
		if f == "auto" {
			var err error
			if f, err = FormatOf(src.path); err != nil {
				return nil, fmt.Errorf("config: %s: %w", src.key, err)
			}
		}
		rows, err := LoadMath(src.path, f, keys)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", src.key, err)
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("config: %s: %s: no problems", src.key, src.path)
		}
		base := filepath.Base(src.path)
		out := make([]core.Problem, len(rows))
		for i, r := range rows {
			where := src.path + ":" + strconv.Itoa(r.Row)
			msgs := r.Messages
			if system != "" {
				if msgs[0].Role == "system" {
					return nil, fmt.Errorf("config: %s: %s: the row has its own system message; leave %s empty for this file",
						src.key, where, keyPath(p, "system_prompt"))
				}
				msgs = append([]Message{{Role: "system", Content: system}}, msgs...)
			}
			if src.tpl != "" {
				tplBefore, tplAfter, _ := strings.Cut(src.tpl, "{problem}")
				last := msgs[len(msgs)-1].Content
				if strings.TrimSpace(tplBefore) != "" && strings.Contains(last, strings.TrimSpace(tplBefore)) ||
					strings.TrimSpace(tplAfter) != "" && strings.Contains(last, strings.TrimSpace(tplAfter)) {
					return nil, fmt.Errorf("config: %s: %s: the prompt already holds the text of the prompt_template (DAPO-17K's rows come templated): leave it empty for this file",
						src.key, where)
				}
				msgs = append([]Message(nil), msgs...)
				msgs[len(msgs)-1].Content = tplBefore + last + tplAfter
			}
			if suffix != "" {
				msgs = append([]Message(nil), msgs...)
				msgs[len(msgs)-1].Content += suffix
			}
			out[i] = core.Problem{
				ID:       base + ":" + strconv.Itoa(r.Row),
				Prompt:   t.template.Render(msgs),
				Answer:   r.Answer,
				Solution: r.Solution,
				Level:    r.Level,
				Source:   where,
			}
		}
		return out, nil
	}
	if t.Train, err = load(mathSource{key: keyPath(p, "train"), path: train, tpl: tplText}); err != nil {
		return nil, err
	}
	trainAt := map[string]string{}
	for _, pr := range t.Train {
		if _, dup := trainAt[pr.Prompt]; !dup {
			trainAt[pr.Prompt] = pr.ID
		}
	}
	for _, e := range evals {
		probs, err := load(e)
		if err != nil {
			return nil, err
		}
		for _, pr := range probs {
			if id, dup := trainAt[pr.Prompt]; dup {
				return nil, fmt.Errorf("config: %s: problem %s: prompt also in the training file (%s)", e.key, pr.ID, id)
			}
		}
		t.evals = append(t.evals, core.EvalSet{Name: e.name, Problems: probs})
	}
	return t, nil
}

// mathTokenizer builds the math task's tokenizer (tokName: "char" or a
// model directory, with eos_token eosText) and chat template (tplName:
// auto or a built-in name, with Qwen3's enable_thinking); p names the keys
// in errors.
func mathTokenizer(p *core.Params, tokName, tplName, eosText string, thinking bool) (core.Tokenizer, ChatTemplate, error) {
	var tok core.Tokenizer
	if tokName == "char" {
		tok = NewCharTokenizer()
		if eosText != "" {
			return nil, ChatTemplate{}, fmt.Errorf("config: %s: the character tokenizer's EOS is fixed; eos_token needs a model directory in %s", keyPath(p, "eos_token"), keyPath(p, "tokenizer"))
		}
	} else {
		hft, err := tokenizer.Load(tokName)
		if err != nil {
			return nil, ChatTemplate{}, fmt.Errorf("config: %s: %w", keyPath(p, "tokenizer"), err)
		}
		ct := &chatTokenizer{Tokenizer: hft, bos: hft.BOS(), eos: hft.EOS(), pad: hft.PAD()}
		if eosText != "" {
			id, ok := hft.TokenToID(eosText)
			if !ok {
				return nil, ChatTemplate{}, fmt.Errorf("config: %s: %q is not a token of %s", keyPath(p, "eos_token"), eosText, tokName)
			}
			ct.eos = id
		}
		if ct.eos < 0 {
			return nil, ChatTemplate{}, fmt.Errorf("config: %s: %s names no eos_token in tokenizer_config.json, so a response could never end; set %s",
				keyPath(p, "tokenizer"), tokName, keyPath(p, "eos_token"))
		}
		if ct.pad < 0 {
			ct.pad = ct.eos // as Hugging Face users do for models without a pad token
		}
		tok = ct
	}
	var template ChatTemplate
	var err error
	switch {
	case tplName != "auto":
		if template, err = ParseChatTemplate(tplName); err != nil {
			return nil, ChatTemplate{}, fmt.Errorf("config: %s: %w", keyPath(p, "chat_template"), err)
		}
	case tokName == "char":
		template = ChatTemplate{Name: ChatNone}
	default:
		if template, err = DetectChatTemplate(tokName); err != nil {
			return nil, ChatTemplate{}, fmt.Errorf("config: %s (auto): %w", keyPath(p, "chat_template"), err)
		}
	}
	switch {
	case template.Name == ChatQwen3:
		template.EnableThinking = thinking
	case thinking:
		return nil, ChatTemplate{}, fmt.Errorf("config: %s: true needs Qwen3's thinking switch (chat_template qwen3), but the template is %s", keyPath(p, "enable_thinking"), template.Name)
	}
	if ct, ok := tok.(*chatTokenizer); ok && template.Name != ChatNone {
		// As Hugging Face tokenizes a rendered chat (add_special_tokens=False):
		// the template's text alone decides whether the prompt has a BOS.
		ct.bos = -1
	}
	if _, ok := tok.(CharTokenizer); ok && template.IncludesBOS() {
		return nil, ChatTemplate{}, fmt.Errorf("config: %s: %s writes a BOS token, which the character tokenizer has not; use chatml or none", keyPath(p, "chat_template"), template.Name)
	}
	return tok, template, nil
}

// TokenizerOf is the tokenizer and chat template that the task of a
// `task:` mapping uses, built without reading its problems (a served
// checkpoint needs no training file): the math and wordprob tasks'
// tokenizer, eos_token and chat_template keys, the character tokenizer
// with no template for arith, jsonl and countdown. Another registered
// task is built in full (New) for its tokenizer, with no template.
func TokenizerOf(task map[string]any) (core.Tokenizer, ChatTemplate, error) {
	name, _ := task["name"].(string)
	switch name {
	case "arith", "jsonl", "countdown":
		return NewCharTokenizer(), ChatTemplate{Name: ChatNone}, nil
	case "math", "wordprob":
		p := core.NewParams("task", task)
		tokName := p.String("tokenizer", "char")
		tplName := p.String("chat_template", "auto")
		eosText := p.String("eos_token", "")
		thinking := p.Bool("enable_thinking", false)
		if err := p.Err(); err != nil {
			return nil, ChatTemplate{}, err
		}
		return mathTokenizer(p, tokName, tplName, eosText, thinking)
	}
	t, err := New(core.NewParams("task", task))
	if err != nil {
		return nil, ChatTemplate{}, err
	}
	return t.Tokenizer(), ChatTemplate{Name: ChatNone}, nil
}

// chatTokenizer is a model's tokenizer with the task's BOS (none with a
// chat template, whose text holds the BOS token when the model wants one), EOS (eos_token) and PAD (the EOS when the model
// has no pad token).
type chatTokenizer struct {
	*tokenizer.Tokenizer
	bos, eos, pad int32
}

func (c *chatTokenizer) BOS() int32 { return c.bos }
func (c *chatTokenizer) EOS() int32 { return c.eos }
func (c *chatTokenizer) PAD() int32 { return c.pad }

// ModelBOS is the model's own BOS (tokenizer_config.json's bos_token, -1
// for none), which Hugging Face adds to a plain text prompt; BOS is the
// task's, none under a chat template.
func (c *chatTokenizer) ModelBOS() int32 { return c.Tokenizer.BOS() }

// Name returns "math".
func (t *Math) Name() string { return "math" }

// Tokenizer returns the configured tokenizer.
func (t *Math) Tokenizer() core.Tokenizer { return t.tok }

// Verifier returns the MathVerifier with the configured rewards.
func (t *Math) Verifier() core.Verifier { return t.verifier }

// ChatTemplate returns the template the prompts were rendered with.
func (t *Math) ChatTemplate() ChatTemplate { return t.template }

// EvalSets returns the eval files' problems, in config order.
func (t *Math) EvalSets() []core.EvalSet { return t.evals }

// TrainProblems implements core.TrainLister.
func (t *Math) TrainProblems() []core.Problem { return t.Train }

// SampleTrain draws n training problems uniformly (with replacement).
func (t *Math) SampleTrain(rng *rand.Rand, n int) []core.Problem {
	return sampleUniform(rng, t.Train, n)
}
