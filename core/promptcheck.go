package core

import "fmt"

// TrainLister is implemented by tasks whose training problems are a fixed
// list (read from files), so they can be checked when the task loads.
type TrainLister interface {
	TrainProblems() []Problem
}

// LengthLimiter is implemented by backends with a fixed context: the
// longest prompt (BOS included) that fits with maxResponseTokens generated
// after it, and the longest prompt + response sequence it can score.
type LengthLimiter interface {
	MaxPromptTokens(maxResponseTokens int) int
	MaxSequenceTokens() int
}

// where names a problem in an error: its source (file:line) when known.
func where(set string, p Problem) string {
	if p.Source != "" {
		return p.Source
	}
	return fmt.Sprintf("%s problem %q", set, p.ID)
}

// CheckPromptLengths checks, when a run starts, that every prompt of the
// task (its eval sets, and its training problems when it lists them) fits
// the backend's context with rollout.max_response_tokens after it, so a
// long prompt fails now, naming its file and line, not at the step that
// happens to sample it. withSolutions also checks prompt + worked solution
// + EOS, what the supervised warm start trains on.
func CheckPromptLengths(task Task, lim LengthLimiter, maxResponseTokens int, withSolutions bool) error {
	tok := task.Tokenizer()
	maxPrompt := lim.MaxPromptTokens(maxResponseTokens)
	maxSeq := lim.MaxSequenceTokens()
	check := func(set string, p Problem) error {
		n := len(EncodePrompt(tok, p.Prompt))
		if n > maxPrompt {
			return fmt.Errorf("task: %s: the prompt is %d tokens; with rollout.max_response_tokens = %d the model fits prompts of at most %d (raise model.max_len, lower rollout.max_response_tokens, or drop the problem)",
				where(set, p), n, maxResponseTokens, maxPrompt)
		}
		if withSolutions {
			sol := p.Solution
			if sol == "" {
				sol = "Answer: " + p.Answer
			}
			if m := n + len(tok.Encode(sol)) + 1; m > maxSeq {
				return fmt.Errorf("task: %s: prompt + solution is %d tokens, more than the model's %d (raise model.max_len for the warm start, or shorten the solution)",
					where(set, p), m, maxSeq)
			}
		}
		return nil
	}
	if tl, ok := task.(TrainLister); ok {
		for _, p := range tl.TrainProblems() {
			if err := check("train", p); err != nil {
				return err
			}
		}
	}
	for _, set := range task.EvalSets() {
		for _, p := range set.Problems {
			if err := check("eval set "+set.Name, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// EncodePrompt is BOS followed by the prompt's tokens; without BOS (a
// negative BOS id) only the prompt's tokens.
func EncodePrompt(tok Tokenizer, prompt string) []int32 {
	if tok.BOS() < 0 {
		return tok.Encode(prompt)
	}
	return append([]int32{tok.BOS()}, tok.Encode(prompt)...)
}
