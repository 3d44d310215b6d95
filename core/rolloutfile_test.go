package core

import (
	"reflect"
	"strings"
	"testing"
)

// A sequence with every required field; the cases below change one thing.
const goodSeq = `{"group": 0, "reward": 1, "logprobs": [-1, -2]}`

func TestReadRolloutErrors(t *testing.T) {
	file := func(seqs ...string) string {
		return `{"step": 1, "total_steps": 5, "sequences": [` + strings.Join(seqs, ", ") + `]}`
	}
	cases := []struct{ name, text, want string }{
		// The top level.
		{"not JSON", `{"step": `, "batch.json: unexpected end of JSON input"},
		{"null file", `null`, "batch.json: want a JSON object"},
		{"list file", `[]`, "batch.json: want a JSON object"},
		{"missing step", `{"total_steps": 5, "sequences": [` + goodSeq + `]}`, "batch.json: step: missing"},
		{"null step", `{"step": null, "total_steps": 5, "sequences": [` + goodSeq + `]}`, "batch.json: step: missing"},
		{"step as string", `{"step": "1", "sequences": [` + goodSeq + `]}`, "batch.json: step: want an integer, got string"},
		{"fractional step", `{"step": 1.5, "sequences": [` + goodSeq + `]}`, "batch.json: step: want an integer, got number 1.5"},
		{"step out of int range", `{"step": 1e30, "sequences": [` + goodSeq + `]}`, "batch.json: step: want an integer, got number 1e30"},
		{"negative step", `{"step": -1, "sequences": [` + goodSeq + `]}`, "batch.json: step: -1: must be >= 0"},
		{"negative total_steps", `{"step": 1, "total_steps": -3, "sequences": [` + goodSeq + `]}`, "batch.json: total_steps: -3: must be >= 0"},
		{"step at total_steps", `{"step": 5, "total_steps": 5, "sequences": [` + goodSeq + `]}`, "batch.json: step: 5: must be < total_steps (5)"},
		{"missing sequences", `{"step": 1}`, "batch.json: sequences: missing"},
		{"null sequences", `{"step": 1, "sequences": null}`, "batch.json: sequences: missing"},
		{"empty sequences", `{"step": 1, "sequences": []}`, "batch.json: sequences: empty"},
		{"sequences not a list", `{"step": 1, "sequences": {}}`, "batch.json: sequences: want a list, got object"},
		// A sequence.
		{"null sequence", file(goodSeq, `null`), "batch.json: sequences[1]: want a JSON object"},
		{"number sequence", file(`3`), "batch.json: sequences[0]: want a JSON object"},
		{"missing group", file(goodSeq, `{"reward": 1, "logprobs": [-1]}`), "batch.json: sequences[1].group: missing"},
		{"null group", file(`{"group": null, "reward": 1, "logprobs": [-1]}`), "batch.json: sequences[0].group: missing"},
		{"fractional group", file(`{"group": 0.5, "reward": 1, "logprobs": [-1]}`), "batch.json: sequences[0].group: want an integer, got number 0.5"},
		{"missing reward", file(goodSeq, goodSeq, `{"group": 2, "logprobs": [-1]}`), "batch.json: sequences[2].reward: missing"},
		{"null reward", file(`{"group": 0, "reward": null, "logprobs": [-1]}`), "batch.json: sequences[0].reward: missing"},
		{"reward as string", file(`{"group": 0, "reward": "1", "logprobs": [-1]}`), "batch.json: sequences[0].reward: want a number, got string"},
		{"missing logprobs", file(`{"group": 0, "reward": 1}`), "batch.json: sequences[0].logprobs: missing"},
		{"null logprobs", file(`{"group": 0, "reward": 1, "logprobs": null}`), "batch.json: sequences[0].logprobs: missing"},
		{"empty logprobs", file(`{"group": 0, "reward": 1, "logprobs": []}`), "batch.json: sequences[0].logprobs: empty"},
		{"null log-prob", file(goodSeq, `{"group": 0, "reward": 1, "logprobs": [-1, null, -2]}`), "batch.json: sequences[1].logprobs[1]: null (want a number)"},
		{"string log-prob", file(`{"group": 0, "reward": 1, "logprobs": ["a"]}`), "batch.json: sequences[0].logprobs: want a number, got string"},
		{"entropies too short", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "entropies": [1]}`), "batch.json: sequences[0].entropies: 1 entries for 2 tokens"},
		{"null entropy", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "entropies": [1, null]}`), "batch.json: sequences[0].entropies[1]: null (want a number)"},
		{"values too short", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "values": [[1]]}`), "batch.json: sequences[0].values: 1 rows for 2 tokens"},
		{"null value", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "values": [[1, 2], [3, null]]}`), "batch.json: sequences[0].values[1][1]: null (want a number)"},
		{"null value row", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "values": [[1], null]}`), "batch.json: sequences[0].values[1]: null"},
		{"empty value row", file(`{"group": 0, "reward": 1, "logprobs": [-1], "values": [[]]}`), "batch.json: sequences[0].values[0]: 0 heads, want 1"},
		{"ragged heads", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "values": [[1, 2], [1]]}`), "batch.json: sequences[0].values[1]: 1 heads, want 2"},
		{"heads differ between sequences", file(`{"group": 0, "reward": 1, "logprobs": [-1], "values": [[1, 2]]}`, `{"group": 0, "reward": 1, "logprobs": [-1], "values": [[1, 2, 3]]}`),
			"batch.json: sequences[1].values[0]: 3 heads, want 2"},
		{"empty embedding", file(`{"group": 0, "reward": 1, "logprobs": [-1], "embedding": []}`), "batch.json: sequences[0].embedding: empty"},
		{"null in embedding", file(`{"group": 0, "reward": 1, "logprobs": [-1], "embedding": [0.5, null]}`), "batch.json: sequences[0].embedding[1]: null (want a number)"},
		{"embedding lengths differ", file(`{"group": 0, "reward": 1, "logprobs": [-1], "embedding": [1, 2]}`, `{"group": 0, "reward": 1, "logprobs": [-1], "embedding": [1, 2, 3]}`),
			"batch.json: sequences[1].embedding: 3 numbers, want 2"},
		{"correct not a boolean", file(`{"group": 0, "reward": 1, "logprobs": [-1], "correct": "yes"}`), "batch.json: sequences[0].correct: want true or false, got string"},
		{"text not a string", file(`{"group": 0, "reward": 1, "logprobs": [-1], "text": 5}`), "batch.json: sequences[0].text: want a string, got number"},
		{"ref_logprobs too short", file(`{"group": 0, "reward": 1, "logprobs": [-1, -2], "ref_logprobs": [-1]}`), "batch.json: sequences[0].ref_logprobs: 1 entries for 2 tokens"},
		{"new_logprobs null entry", file(`{"group": 0, "reward": 1, "logprobs": [-1], "new_logprobs": [null]}`), "batch.json: sequences[0].new_logprobs[0]: null (want a number)"},
		{"new_logprobs on some sequences only", file(`{"group": 0, "reward": 1, "logprobs": [-1], "new_logprobs": [-1]}`, `{"group": 0, "reward": 1, "logprobs": [-1]}`),
			"batch.json: sequences[1].new_logprobs: given for some sequences and not others (sequence 0 has them)"},
		{"ref_logprobs on some sequences only", file(`{"group": 0, "reward": 1, "logprobs": [-1]}`, `{"group": 0, "reward": 1, "logprobs": [-1], "ref_logprobs": [-1]}`),
			"batch.json: sequences[1].ref_logprobs: given for some sequences and not others (sequence 0 lacks them)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ReadRollout(strings.NewReader(c.text), "batch.json")
			if err == nil {
				t.Fatalf("accepted: %+v; want an error containing %q", r, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestReadRolloutGood(t *testing.T) {
	cases := []struct {
		name, text string
		want       *Rollout
	}{
		{"minimal; total_steps defaults to 0 (the caller's)", `{"step": 0, "sequences": [` + goodSeq + `]}`,
			&Rollout{Seqs: []Sequence{{Group: 0, Reward: 1, LogProbs: []float64{-1, -2}, Response: []int32{0, 0}}},
				File: &RolloutFileExtras{HasCorrect: []bool{false}}}},
		{"every field; null optional fields are absent; unknown fields ignored",
			`{"step": 12, "total_steps": 300, "note": "x", "sequences": [
			  {"group": 3, "reward": -1, "logprobs": [-0.5, -0.25], "entropies": [0.5, 1.5],
			   "values": [[0.1, 0.2], [0.3, 0.4]], "embedding": [1, -2, 3], "correct": false, "text": "Answer: 2", "extra": [1]},
			  {"group": -7, "reward": 0.5, "logprobs": [0], "entropies": null, "values": null, "embedding": null, "correct": true}]}`,
			&Rollout{Step: 12, TotalSteps: 300, ValueHeads: 2, Seqs: []Sequence{
				{Group: 3, Reward: -1, LogProbs: []float64{-0.5, -0.25}, Entropies: []float64{0.5, 1.5},
					Values: []float64{0.1, 0.2, 0.3, 0.4}, Embedding: []float64{1, -2, 3}, Text: "Answer: 2", Response: []int32{0, 0}},
				{Group: -7, Reward: 0.5, LogProbs: []float64{0}, Correct: true, Response: []int32{0}},
			}, File: &RolloutFileExtras{HasCorrect: []bool{true, true}}}},
		{"reference and new log-probs; correct given for one sequence only",
			`{"step": 1, "sequences": [
			  {"group": 0, "reward": 1, "logprobs": [-1, -2], "ref_logprobs": [-1.5, -2.5], "new_logprobs": [-0.9, -2.1], "correct": true},
			  {"group": 0, "reward": -1, "logprobs": [-3], "ref_logprobs": [-3.5], "new_logprobs": [-2.9]}]}`,
			&Rollout{Step: 1, Seqs: []Sequence{
				{Group: 0, Reward: 1, LogProbs: []float64{-1, -2}, RefLogProbs: []float64{-1.5, -2.5}, Correct: true, Response: []int32{0, 0}},
				{Group: 0, Reward: -1, LogProbs: []float64{-3}, RefLogProbs: []float64{-3.5}, Response: []int32{0}},
			}, File: &RolloutFileExtras{HasCorrect: []bool{true, false}, NewLogProbs: [][]float64{{-0.9, -2.1}, {-2.9}}}}},
		{"problem id, answer and solution keys (outcome_ucb, rare_correct)",
			`{"step": 2, "sequences": [
			  {"group": 0, "reward": 1, "logprobs": [-1], "correct": true, "problem_id": "p7", "answer_key": "24", "solution_key": "(1+2)*8"},
			  {"group": 0, "reward": -1, "logprobs": [-2], "correct": false, "problem_id": "p7", "answer_key": "23"}]}`,
			&Rollout{Step: 2, Seqs: []Sequence{
				{Group: 0, Reward: 1, LogProbs: []float64{-1}, Correct: true, ProblemID: "p7", AnswerKey: "24", SolutionKey: "(1+2)*8", Response: []int32{0}},
				{Group: 0, Reward: -1, LogProbs: []float64{-2}, ProblemID: "p7", AnswerKey: "23", Response: []int32{0}},
			}, File: &RolloutFileExtras{HasCorrect: []bool{true, true}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadRollout(strings.NewReader(c.text), "batch.json")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
			// Written back and read again, the batch is unchanged.
			data, err := MarshalRollout(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ReadRollout(strings.NewReader(string(data)), "again.json")
			if err != nil {
				t.Fatalf("re-reading %s: %v", data, err)
			}
			if !reflect.DeepEqual(again, c.want) {
				t.Fatalf("round trip: got %+v\nwant %+v", again, c.want)
			}
		})
	}
}
