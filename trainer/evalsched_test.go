package trainer

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

func TestResponseEvalDue(t *testing.T) {
	for _, c := range []struct {
		every           int
		generated, last int64
		want            bool
	}{
		{0, 100, 10, false},   // off
		{6, 0, 0, false},      // before the first step
		{6, 4, 4, false},      // 0 -> 4: no multiple of 6
		{6, 8, 4, true},       // 4 -> 8 passes 6
		{6, 12, 4, true},      // 8 -> 12 reaches 12 exactly
		{6, 16, 4, false},     // 12 -> 16: 12 was counted at the step before
		{6, 20, 4, true},      // 16 -> 20 passes 18
		{6, 40, 27, true},     // 13 -> 40 passes 18, 24, 30, 36: one evaluation
		{6, 17, 5, false},     // 12 -> 17, not 18 yet
		{100, 100, 100, true}, // the first step reaches it
		{100, 99, 99, false},
	} {
		if got := responseEvalDue(c.every, c.generated, c.last); got != c.want {
			t.Errorf("responseEvalDue(%d, %d, %d) = %v, want %v", c.every, c.generated, c.last, got, c.want)
		}
	}
}

// evalRowSteps are the steps of the rows of run's metrics.jsonl that hold
// an evaluation.
func evalRowSteps(t *testing.T, run string) []int {
	t.Helper()
	var steps []int
	for _, row := range metricRows(t, run) {
		if _, ok := row["val/v/avg@4"]; ok {
			steps = append(steps, int(row["step"]))
		}
	}
	return steps
}

// eval.every_responses evaluates before the first step at or past each
// multiple: 4 responses a step (2 prompts x 2), every 6, so the counts
// before steps 1..5 are 4, 8, 12, 16, 20 and the multiples 6, 12, 18 are
// first reached before steps 2, 3 and 5; step 6 is the evaluation after the
// last step, which every run makes.
func TestEvalEveryResponses(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want []int
	}{
		{[]string{"eval.every_responses=6", "eval.at_start=false"}, []int{2, 3, 5, 6}},
		{[]string{"eval.every_responses=6"}, []int{0, 2, 3, 5, 6}},
		// Both schedules: steps 0 and 4 from eval.every, 2, 3, 5 from the
		// responses.
		{[]string{"eval.every_responses=6", "eval.every=4"}, []int{0, 2, 3, 4, 5, 6}},
		{[]string{"eval.every_responses=0", "eval.at_start=false"}, []int{6}},
		{[]string{"eval.every_responses=25", "eval.at_start=false"}, []int{6}}, // 24 in all: never reached
	} {
		cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: append([]string{"train.steps=6", "train.checkpoint_every=6",
			"train.prompts_per_step=2", "rollout.n=2", "eval.every=0"}, c.sets...)})
		if err != nil {
			t.Fatal(err)
		}
		tr := fakeTrainer(t, cfg, &fakeBackend{})
		if err := tr.Run(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if got := evalRowSteps(t, tr.RunDir); !slices.Equal(got, c.want) {
			t.Errorf("%v: evaluations at steps %v, want %v", c.sets, got, c.want)
		}
	}
	if _, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"eval.every_responses=-1"}}); err == nil {
		t.Error("eval.every_responses=-1 accepted")
	}
}

// Under dynamic sampling the steps generate different counts: each
// evaluation but the last is at the first step boundary at or past a
// multiple, worked out here from the rows' own train/generated_responses,
// and a run resumed from any checkpoint evaluates at the same steps.
func TestEvalEveryResponsesDynamic(t *testing.T) {
	const every = 10
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{"train.steps=8", "train.checkpoint_every=1",
		"train.keep_checkpoints=8", "train.prompts_per_step=2", "rollout.n=2", "eval.every=0", "eval.at_start=false",
		"train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_extra_batches=3",
		fmt.Sprintf("eval.every_responses=%d", every)}})
	if err != nil {
		t.Fatal(err)
	}
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	var want []int
	before, varied := 0.0, false
	for _, row := range metricRows(t, tr.RunDir) {
		g, ok := row["train/generated_responses"]
		if !ok {
			continue // the final evaluation
		}
		s := int(row["step"])
		if s > 0 && int(before)/every > int(before-lastG(t, tr.RunDir, s-1))/every {
			want = append(want, s)
		}
		before += g
		varied = varied || g != 4
	}
	want = append(want, 8)
	if !varied {
		t.Fatal("every step generated 4 responses: the test does not exercise dynamic sampling")
	}
	got := evalRowSteps(t, tr.RunDir)
	if !slices.Equal(got, want) {
		t.Fatalf("evaluations at steps %v, want %v", got, want)
	}
	if len(want) < 3 {
		t.Fatalf("only %v: too few evaluations to test", want)
	}
	for _, ck := range []int{1, want[0], want[0] + 1, 7} {
		tr2 := fakeTrainer(t, cfg, &fakeBackend{})
		tr2.RunDir = tr.RunDir
		start, err := tr2.Restore(filepath.Join(checkpointRoot(tr.RunDir), fmt.Sprintf("step-%06d", ck)))
		if err != nil || start != ck {
			t.Fatalf("restore step %d: %d, %v", ck, start, err)
		}
		if err := tr2.Run(context.Background(), start); err != nil {
			t.Fatal(err)
		}
		if got := evalRowSteps(t, tr.RunDir); !slices.Equal(got, want) {
			t.Errorf("resumed at step %d: evaluations at steps %v, want %v", ck, got, want)
		}
	}
}

// lastG is train/generated_responses of step s in run's metrics.jsonl.
func lastG(t *testing.T, run string, s int) float64 {
	t.Helper()
	for _, row := range metricRows(t, run) {
		if g, ok := row["train/generated_responses"]; ok && int(row["step"]) == s {
			return g
		}
	}
	t.Fatalf("no row of step %d", s)
	return 0
}
