package core

import "math/rand/v2"

// Problem is one verifiable problem: a prompt and its reference answer.
type Problem struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	Answer string `json:"answer"`
	// Solution is a worked solution ending with the answer in the form the
	// task's verifier reads ("Answer: N", \boxed{N}), used by supervised
	// warm start; empty when the task has none.
	Solution string `json:"solution,omitempty"`
	// Level is the difficulty level (task specific; 0 when unknown).
	Level int `json:"level,omitempty"`
	// Source says where the problem came from, for error messages
	// ("train.jsonl:12"); empty for generated problems.
	Source string `json:"-"`
}

// Tokenizer maps text to token ids and back.
type Tokenizer interface {
	Encode(text string) []int32
	Decode(ids []int32) string
	VocabSize() int
	// BOS starts every prompt (a negative id: the tokenizer has none, or the
	// prompt text already holds it); EOS ends a response; PAD fills batches.
	BOS() int32
	EOS() int32
	PAD() int32
}

// Verifier scores a response against a problem's reference answer.
type Verifier interface {
	// Verify returns the reward (by default +1 correct, -1 incorrect) and
	// whether the response is correct.
	Verify(p Problem, response string) (reward float64, correct bool)
}

// EvalSet is a named held-out set of problems.
type EvalSet struct {
	Name     string
	Problems []Problem
}

// Task is a source of verifiable problems.
type Task interface {
	Name() string
	Tokenizer() Tokenizer
	Verifier() Verifier
	// SampleTrain draws n training problems with rng (deterministic given rng).
	SampleTrain(rng *rand.Rand, n int) []Problem
	// EvalSets returns the held-out sets, disjoint from every training problem.
	EvalSets() []EvalSet
}
