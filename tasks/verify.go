package tasks

import (
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks/answer"
)

// AnswerVerifier checks the final "Answer:" of a response against the
// problem's reference answer. The answer is the text after the last
// "Answer:" on the last line that contains one; both sides go through
// NormalizeAnswer, which writes a decimal number in its unique canonical form,
// so numbers compare by value ("1.50" equals "1.5") and everything else as
// text. A response without "Answer:" or with an empty answer is incorrect.
//
// Verification costs time linear in the lengths of the response and the
// answer, whatever they hold: numbers of any number of digits are compared as
// canonical digit strings, never converted to big numbers (whose decimal
// parsing is quadratic: a 300,000-digit answer took over a second per
// comparison).
type AnswerVerifier struct {
	// CorrectReward is returned for a correct answer (NewAnswerVerifier: +1).
	CorrectReward float64
	// IncorrectReward is returned otherwise (NewAnswerVerifier: -1).
	IncorrectReward float64
}

var _ core.Verifier = AnswerVerifier{}

// NewAnswerVerifier returns a verifier with the default rewards +1 / -1.
func NewAnswerVerifier() AnswerVerifier {
	return AnswerVerifier{CorrectReward: 1, IncorrectReward: -1}
}

// Verify implements core.Verifier.
func (v AnswerVerifier) Verify(p core.Problem, response string) (float64, bool) {
	got, ok := ExtractAnswer(response)
	if ok && AnswersEqual(got, p.Answer) {
		return v.CorrectReward, true
	}
	return v.IncorrectReward, false
}

// ExtractAnswer returns the raw text after the last "Answer:" on the last
// line containing "Answer:", and false when there is no such line
// (answer.Extract).
func ExtractAnswer(response string) (string, bool) { return answer.Extract(response) }

// AnswersEqual reports whether two raw answers match after normalisation
// (answer.Equal).
func AnswersEqual(a, b string) bool { return answer.Equal(a, b) }

// NormalizeAnswer canonicalises an answer string (answer.Normalize).
func NormalizeAnswer(s string) string { return answer.Normalize(s) }

// Rewards returns the rewards of an incorrect and a correct answer
// (core.RewardLevels).
func (v AnswerVerifier) Rewards() (incorrect, correct float64) {
	return v.IncorrectReward, v.CorrectReward
}

// AnswerKey is the response's final answer as the verifier compares it
// (normalised; "" for none): core.AnswerKeyer, for maj@k.
func (v AnswerVerifier) AnswerKey(_ core.Problem, response string) string {
	got, ok := ExtractAnswer(response)
	if !ok {
		return ""
	}
	return NormalizeAnswer(got)
}
