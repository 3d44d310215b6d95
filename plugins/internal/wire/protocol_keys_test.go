package wire

import (
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

// The verifier's answer and solution keys reach a plugin: sent per
// sequence when any sequence has one, not at all when none has, and a
// list of the wrong length is refused by name.
func TestBatchKeys(t *testing.T) {
	seq := func(ans, sol string) core.Sequence {
		return core.Sequence{Response: []int32{1}, LogProbs: []float64{-1}, AnswerKey: ans, SolutionKey: sol}
	}
	r := &core.Rollout{Seqs: []core.Sequence{seq("24", "3*8"), seq("23", ""), seq("", "")}}
	b, err := EncodeBatch(core.StepInfo{}, r, core.Needs{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(b.AnswerKey, ",") != "24,23," || strings.Join(b.SolutionKey, ",") != "3*8,," {
		t.Fatalf("sent answer keys %q, solution keys %q", b.AnswerKey, b.SolutionKey)
	}
	_, got, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range got.Seqs {
		if s.AnswerKey != r.Seqs[i].AnswerKey || s.SolutionKey != r.Seqs[i].SolutionKey {
			t.Errorf("sequence %d: keys %q %q, want %q %q", i, s.AnswerKey, s.SolutionKey, r.Seqs[i].AnswerKey, r.Seqs[i].SolutionKey)
		}
	}

	none := &core.Rollout{Seqs: []core.Sequence{seq("", ""), seq("", "")}}
	if b, err := EncodeBatch(core.StepInfo{}, none, core.Needs{}); err != nil || b.AnswerKey != nil || b.SolutionKey != nil {
		t.Errorf("no keys: sent %q %q (%v)", b.GetAnswerKey(), b.GetSolutionKey(), err)
	}

	b.SolutionKey = b.SolutionKey[:2]
	if _, _, err := DecodeBatch(b); err == nil || !strings.Contains(err.Error(), "solution_key has 2 entries for 3 sequences") {
		t.Errorf("short solution_key: %v", err)
	}
}

// The step info reaches a plugin whole, rollout.max_response_tokens
// included (a length-normalised bonus needs it).
func TestStepInfoRoundTrip(t *testing.T) {
	info := core.StepInfo{Step: 3, TotalSteps: 9, Algorithm: "ppo", Seed: 5, MaxResponseTokens: 512}
	r := &core.Rollout{Seqs: []core.Sequence{{Response: []int32{1}, LogProbs: []float64{-1}}}}
	b, err := EncodeBatch(info, r, core.Needs{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != info {
		t.Fatalf("decoded %+v, sent %+v", got, info)
	}
}
