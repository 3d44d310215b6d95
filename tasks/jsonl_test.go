package tasks

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
)

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJSONLGood(t *testing.T) {
	dir := t.TempDir()
	train := writeFile(t, dir, "data.jsonl", `{"prompt": "1+1=", "answer": "2"}

{"prompt": "2+2=", "answer": 4, "solution": "2+2=4\nAnswer: 4", "id": "four", "level": 1, "extra": true}
  
{"prompt": "x=", "answer": "-1.5"}`) // no trailing newline
	val := writeFile(t, dir, "val.jsonl", `{"prompt": "3+3=", "answer": "6"}`+"\n")
	task, err := New(core.NewParams("task", map[string]any{
		"name": "jsonl", "path": train,
		"eval":           []any{map[string]any{"name": "v", "path": val}},
		"correct_reward": 2.0,
	}))
	if err != nil {
		t.Fatal(err)
	}
	j := task.(*JSONL)
	want := []core.Problem{
		{ID: "data.jsonl:1", Prompt: "1+1=", Answer: "2", Solution: "Answer: 2", Source: train + ":1"},
		{ID: "four", Prompt: "2+2=", Answer: "4", Solution: "2+2=4\nAnswer: 4", Level: 1, Source: train + ":3"},
		{ID: "data.jsonl:5", Prompt: "x=", Answer: "-1.5", Solution: "Answer: -1.5", Source: train + ":5"},
	}
	if !reflect.DeepEqual(j.Train, want) {
		t.Errorf("Train = %+v\nwant %+v", j.Train, want)
	}
	evals := task.EvalSets()
	if len(evals) != 1 || evals[0].Name != "v" || len(evals[0].Problems) != 1 || evals[0].Problems[0].ID != "val.jsonl:1" {
		t.Errorf("EvalSets = %+v", evals)
	}
	if r, ok := task.Verifier().Verify(want[2], "Answer: -1.50"); !ok || r != 2 {
		t.Errorf("Verify = %v, %v; want 2, true", r, ok)
	}
	if task.Name() != "jsonl" || task.Tokenizer().VocabSize() != 101 {
		t.Error("name or tokenizer")
	}

	// Uniform, deterministic sampling.
	s1 := task.SampleTrain(rand.New(rand.NewPCG(1, 2)), 3000)
	s2 := task.SampleTrain(rand.New(rand.NewPCG(1, 2)), 3000)
	if !reflect.DeepEqual(s1, s2) {
		t.Error("same seed gave different samples")
	}
	count := map[string]int{}
	for _, p := range s1 {
		count[p.ID]++
	}
	for _, p := range want {
		if c := count[p.ID]; c < 850 || c > 1150 {
			t.Errorf("%s drawn %d of 3000 times, want about 1000", p.ID, c)
		}
	}
}

func TestJSONLMalformed(t *testing.T) {
	good := `{"prompt": "1+1=", "answer": "2"}` + "\n"
	cases := []struct {
		name, text, want string
	}{
		{"bad json", good + "{oops\n", "data.jsonl:2: bad JSON"},
		{"missing answer", good + good + "\n" + good + good + good + `{"prompt": "p"}` + "\n", `data.jsonl:7: missing "answer"`},
		{"missing prompt", `{"answer": "2"}`, `data.jsonl:1: missing "prompt"`},
		{"null prompt", `{"prompt": null, "answer": "2"}`, `data.jsonl:1: missing "prompt"`},
		{"empty answer", `{"prompt": "p", "answer": ""}`, `data.jsonl:1: empty "answer"`},
		{"prompt type", `{"prompt": 5, "answer": "2"}`, `data.jsonl:1: "prompt": want a string, got 5`},
		{"answer type", `{"prompt": "p", "answer": [2]}`, `data.jsonl:1: "answer": want a string or number, got [2]`},
		{"solution type", `{"prompt": "p", "answer": "2", "solution": 2}`, `data.jsonl:1: "solution": want a string`},
		{"id type", `{"prompt": "p", "answer": "2", "id": 3}`, `data.jsonl:1: "id": want a string`},
		{"level type", `{"prompt": "p", "answer": "2", "level": "hard"}`, `data.jsonl:1: "level": want an integer`},
		{"not an object", good + `[1, 2]`, "data.jsonl:2: bad JSON"},
		{"null line", `null`, "data.jsonl:1: want a JSON object"},
		{"two objects", good + good[:len(good)-1] + good, "data.jsonl:2: bad JSON"},
	}
	for _, c := range cases {
		_, err := ReadJSONL(strings.NewReader(c.text), "data.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// Through the task: the error also names the config key and full path.
	dir := t.TempDir()
	bad := writeFile(t, dir, "data.jsonl", good+`{"prompt": "p"}`)
	_, err := New(core.NewParams("task", map[string]any{"name": "jsonl", "path": bad}))
	if want := "config: task.path: " + bad + `:2: missing "answer"`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestJSONLConfigErrors(t *testing.T) {
	dir := t.TempDir()
	train := writeFile(t, dir, "train.jsonl", `{"prompt": "1+1=", "answer": "2"}`)
	overlap := writeFile(t, dir, "overlap.jsonl", `{"prompt": "5+5=", "answer": "10"}`+"\n"+`{"prompt": "1+1=", "answer": "2"}`)
	empty := writeFile(t, dir, "empty.jsonl", "\n\n")
	cases := []struct {
		name string
		m    map[string]any
		want string
	}{
		{"missing path", map[string]any{}, "config: task.path: required"},
		{"path type", map[string]any{"path": 3}, "config: task.path: want a string"},
		{"no such file", map[string]any{"path": filepath.Join(dir, "nope.jsonl")}, "config: task.path: open"},
		{"empty file", map[string]any{"path": empty}, "config: task.path: " + empty + ": no problems"},
		{"unknown key", map[string]any{"path": train, "evals": []any{}}, "config: task.evals: unknown key"},
		{"eval not list", map[string]any{"path": train, "eval": "x"}, "config: task.eval: want a list"},
		{"eval missing path", map[string]any{"path": train, "eval": []any{map[string]any{"name": "v"}}}, "config: task.eval[0].path: required"},
		{"eval missing name", map[string]any{"path": train, "eval": []any{map[string]any{"path": train}}}, "config: task.eval[0].name: required"},
		{"eval unknown key", map[string]any{"path": train, "eval": []any{map[string]any{"name": "v", "path": train, "n": 3}}}, "config: task.eval[0].n: unknown key"},
		{"eval dup name", map[string]any{"path": train, "eval": []any{map[string]any{"name": "v", "path": overlap}, map[string]any{"name": "v", "path": overlap}}}, "config: task.eval[1].name: duplicate"},
		{"eval overlaps train", map[string]any{"path": train, "eval": []any{map[string]any{"name": "v", "path": overlap}}}, "config: task.eval[0].path: problem overlap.jsonl:2: prompt also in the training file (train.jsonl:1)"},
		{"reward type", map[string]any{"path": train, "incorrect_reward": "low"}, "config: task.incorrect_reward: want a number"},
	}
	for _, c := range cases {
		c.m["name"] = "jsonl"
		_, err := New(core.NewParams("task", c.m))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// Sizes are bounded at load time; before, a 10^7-digit answer loaded and then
// stalled training in the verifier.
func TestJSONLSizeLimits(t *testing.T) {
	good := `{"prompt": "1+1=", "answer": "2"}` + "\n"
	line := func(fields string) string { return good + "{" + fields + "}\n" }
	str := func(s string) string { return `"` + s + `"` }
	cases := []struct {
		name, text string
		want       string // error substring; "" means accepted
	}{
		{"answer of 10^7 digits", line(`"prompt": "p", "answer": ` + str(strings.Repeat("9", 10_000_000))),
			`data.jsonl:2: "answer": 10000000 bytes, over the limit of 1024 bytes (tasks.MaxAnswerBytes)`},
		{"numeric answer of 10^7 digits", line(`"prompt": "p", "answer": ` + strings.Repeat("9", 10_000_000)),
			`data.jsonl:2: "answer": 10000000 bytes, over the limit of 1024 bytes`},
		{"answer at the limit", line(`"prompt": "p", "answer": ` + str(strings.Repeat("9", 1024))), ""},
		{"answer one byte over", line(`"prompt": "p", "answer": ` + str(strings.Repeat("9", 1025))),
			`data.jsonl:2: "answer": 1025 bytes, over the limit of 1024 bytes`},
		{"prompt at the limit", line(`"answer": "1", "prompt": ` + str(strings.Repeat("x", 65536))), ""},
		// 21846 three-byte characters: 65538 bytes of UTF-8.
		{"prompt counted in UTF-8 bytes", line(`"answer": "1", "prompt": ` + str(strings.Repeat("€", 21846))),
			`data.jsonl:2: "prompt": 65538 bytes, over the limit of 65536 bytes (tasks.MaxPromptBytes)`},
		// \u0041 is 6 bytes in the file, 1 byte decoded: the decoded size counts.
		{"prompt measured after decoding", line(`"answer": "1", "prompt": ` + str(strings.Repeat(`\u0041`, 65536))), ""},
		{"solution one byte over", line(`"prompt": "p", "answer": "1", "solution": ` + str(strings.Repeat("s", 65537))),
			`data.jsonl:2: "solution": 65537 bytes, over the limit of 65536 bytes (tasks.MaxSolutionBytes)`},
		{"id one byte over", line(`"prompt": "p", "answer": "1", "id": ` + str(strings.Repeat("i", 1025))),
			`data.jsonl:2: "id": 1025 bytes, over the limit of 1024 bytes (tasks.MaxIDBytes)`},
		{"line over 16 MiB in an ignored field", line(`"prompt": "p", "answer": "1", "notes": ` + str(strings.Repeat("n", 16<<20))),
			`data.jsonl:2: line longer than the limit of 16777216 bytes (tasks.MaxLineBytes)`},
		{"long last line without newline", good + `{"prompt": "p", "answer": "1", "notes": ` + str(strings.Repeat("n", 16<<20)) + "}",
			`data.jsonl:2: line longer than the limit of 16777216 bytes`},
	}
	for _, c := range cases {
		probs, err := ReadJSONL(strings.NewReader(c.text), "data.jsonl")
		if c.want == "" {
			if err != nil || len(probs) != 2 {
				t.Errorf("%s: got %d problems, err %v; want 2 problems", c.name, len(probs), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %.200v, want it to contain %q", c.name, err, c.want)
		}
	}

	// Through the task: the error names the config key, the file and the line.
	dir := t.TempDir()
	bad := writeFile(t, dir, "data.jsonl", line(`"prompt": "p", "answer": `+str(strings.Repeat("9", 2000))))
	_, err := New(core.NewParams("task", map[string]any{"name": "jsonl", "path": bad}))
	if want := "config: task.path: " + bad + `:2: "answer": 2000 bytes, over the limit of 1024 bytes (tasks.MaxAnswerBytes)`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestJSONLByteOrderMark(t *testing.T) {
	probs, err := ReadJSONL(strings.NewReader("\uFEFF"+`{"prompt": "1+1=", "answer": "2"}`+"\n"), "data.jsonl")
	if err != nil || len(probs) != 1 || probs[0].Prompt != "1+1=" {
		t.Errorf("got %+v, %v; want the one problem", probs, err)
	}
}

// Invalid UTF-8 inside a JSONL string is an error naming the file and line
// (encoding/json alone would turn it into U+FFFD).
func TestJSONLInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(string) error
	}{
		{"ReadJSONL", func(s string) error { _, err := ReadJSONL(strings.NewReader(s), "p.jsonl"); return err }},
		{"ReadMathJSONL", func(s string) error {
			_, err := ReadMathJSONL(strings.NewReader(s), "p.jsonl", MathKeys{})
			return err
		}},
	} {
		err := tc.read("{\"prompt\": \"1+1\", \"answer\": \"2\"}\n{\"prompt\": \"caf\xe9?\", \"answer\": \"3\"}\n")
		if err == nil || !strings.Contains(err.Error(), "p.jsonl:2: invalid UTF-8 at byte 16") {
			t.Errorf("%s: %v, want p.jsonl:2 and byte 16 (counted by hand)", tc.name, err)
		}
	}
	if i := InvalidUTF8([]byte("héllo \xf0\x9f\x98\x80")); i != -1 {
		t.Errorf("InvalidUTF8 of valid text: %d", i)
	}
	if i := InvalidUTF8([]byte("ab\xc3")); i != 2 {
		t.Errorf("InvalidUTF8 of a cut sequence: %d, want 2", i)
	}
}
