package tasks

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cde-rl/cde/core"
	"github.com/parquet-go/parquet-go"
)

var (
	gsmTrain   = filepath.Join("testdata", "gsm8k", "train_head200.jsonl")
	gsmTest    = filepath.Join("testdata", "gsm8k", "test.jsonl")
	verlTrain  = filepath.Join("testdata", "math", "verl_gsm8k_train.parquet")
	verlTest   = filepath.Join("testdata", "math", "verl_gsm8k_test.parquet")
	mathStyle  = filepath.Join("testdata", "math", "math_style.jsonl")
	qwen3Dir   = filepath.Join("..", "tokenizer", "testdata", "qwen3")
	llama3Dir  = filepath.Join("..", "tokenizer", "testdata", "gen", "node_modules", "@lenml", "tokenizer-llama3", "models")
	verlSuffix = ` Let's think step by step and output the final answer after "####".`
)

// gsmRef reads a GSM8K file with a plain loop: question, the final answer
// (after "#### "), and the whole answer text.
type gsmRow struct{ question, final, full string }

func gsmRef(t *testing.T, path string) []gsmRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []gsmRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct{ Question, Answer string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(r.Answer, "#### ")
		out = append(out, gsmRow{r.Question, parts[len(parts)-1], r.Answer})
	}
	return out
}

func newMath(t *testing.T, m map[string]any) *Math {
	t.Helper()
	m["name"] = "math"
	task, err := New(core.NewParams("task", m))
	if err != nil {
		t.Fatal(err)
	}
	return task.(*Math)
}

// GSM8K JSONL with the character tokenizer: the prompt is the question,
// the answer what follows "#### ", the solution the whole answer text, and
// every solution verifies as correct.
func TestMathGSM8K(t *testing.T) {
	task := newMath(t, map[string]any{"train": gsmTrain, "eval": []any{map[string]any{"name": "gsm8k", "path": gsmTest}}})
	for _, c := range []struct {
		got  []core.Problem
		path string
	}{{task.Train, gsmTrain}, {task.EvalSets()[0].Problems, gsmTest}} {
		ref := gsmRef(t, c.path)
		if len(c.got) != len(ref) {
			t.Fatalf("%s: %d problems, want %d", c.path, len(c.got), len(ref))
		}
		for i, p := range c.got {
			if p.Prompt != ref[i].question || p.Answer != ref[i].final || p.Solution != ref[i].full {
				t.Fatalf("%s row %d: got %+v, want %+v", c.path, i+1, p, ref[i])
			}
			if r, ok := task.Verifier().Verify(p, p.Solution); !ok || r != 1 {
				t.Fatalf("%s row %d: own solution verifies as %v, %v", c.path, i+1, r, ok)
			}
		}
	}
	if len(task.EvalSets()[0].Problems) != 1319 || task.Train[0].Answer != "72" || task.Train[0].Source != gsmTrain+":1" {
		t.Fatalf("train[0] = %+v", task.Train[0])
	}
	if task.Tokenizer().VocabSize() != 101 || task.ChatTemplate().Name != ChatNone {
		t.Fatal("char tokenizer and none template expected")
	}
	if r, ok := task.Verifier().Verify(task.Train[0], "so \\boxed{73}"); ok || r != -1 {
		t.Fatalf("wrong answer verifies as %v, %v", r, ok)
	}
}

// verl-style parquet (written by arrow-rs) with the Qwen3 tokenizer and its
// detected ChatML template.
func TestMathParquetQwen3(t *testing.T) {
	task := newMath(t, map[string]any{
		"train": verlTrain, "tokenizer": qwen3Dir,
		"eval": []any{map[string]any{"name": "test", "path": verlTest}},
	})
	if task.ChatTemplate() != (ChatTemplate{Name: ChatQwen3}) {
		t.Fatalf("template %+v, want qwen3 with enable_thinking false", task.ChatTemplate())
	}
	ref := gsmRef(t, gsmTrain)
	if len(task.Train) != 200 || len(task.EvalSets()[0].Problems) != 100 {
		t.Fatalf("%d train, %d eval", len(task.Train), len(task.EvalSets()[0].Problems))
	}
	for i, p := range task.Train {
		wantPrompt := "<|im_start|>user\n" + ref[i].question + verlSuffix + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
		wantAnswer := strings.ReplaceAll(ref[i].final, ",", "")
		if p.Prompt != wantPrompt || p.Answer != wantAnswer || p.Solution != "" {
			t.Fatalf("row %d: got %+v\nwant prompt %q answer %q", i+1, p, wantPrompt, wantAnswer)
		}
	}
	tok := task.Tokenizer()
	if tok.BOS() != -1 || tok.EOS() != 151645 || tok.PAD() != 151643 {
		t.Fatalf("BOS %d EOS %d PAD %d", tok.BOS(), tok.EOS(), tok.PAD())
	}
	ids := core.EncodePrompt(tok, task.Train[0].Prompt)
	// <|im_start|> user \n ... <|im_end|> \n <|im_start|> assistant \n
	// <think> \n\n </think> \n\n (Qwen3's ids: <think> 151667, </think>
	// 151668, "\n\n" 271)
	n := len(ids)
	if ids[0] != 151644 || ids[n-7] != 151644 || ids[n-9] != 151645 || ids[n-4] != 151667 || ids[n-3] != 271 || ids[n-2] != 151668 || ids[n-1] != 271 {
		t.Fatalf("prompt ids %v", ids)
	}
}

func TestMathSystemPromptAndSuffix(t *testing.T) {
	sys := `Please reason step by step, and put your final answer within \boxed{}.`
	task := newMath(t, map[string]any{"train": mathStyle, "tokenizer": qwen3Dir, "system_prompt": sys, "prompt_suffix": " Be brief.", "enable_thinking": true})
	want := "<|im_start|>system\n" + sys + "<|im_end|>\n<|im_start|>user\nWhat is $\\frac{1}{2} + \\frac{1}{3}$? Be brief.<|im_end|>\n<|im_start|>assistant\n"
	if task.Train[0].Prompt != want {
		t.Fatalf("prompt %q\nwant %q", task.Train[0].Prompt, want)
	}
	// enable_thinking defaults to false: Qwen3's empty thinking block
	// follows the generation prompt.
	task = newMath(t, map[string]any{"train": mathStyle, "tokenizer": qwen3Dir, "system_prompt": sys, "prompt_suffix": " Be brief."})
	if got := task.Train[0].Prompt; got != want+"<think>\n\n</think>\n\n" {
		t.Fatalf("enable_thinking false: prompt %q", got)
	}
	// Only Qwen3's template has the switch.
	_, err := New(core.NewParams("task", map[string]any{"name": "math", "train": mathStyle, "tokenizer": qwen3Dir, "chat_template": "chatml", "enable_thinking": true}))
	if err == nil || !strings.Contains(err.Error(), "task.enable_thinking: true needs Qwen3's thinking switch") {
		t.Fatalf("enable_thinking with chatml: %v", err)
	}
	none := newMath(t, map[string]any{"train": mathStyle, "system_prompt": "S", "chat_template": "none"})
	if got := none.Train[1].Prompt; got != "S\n\nSolve $2x + 3 = 11$ for $x$." {
		t.Fatalf("none: %q", got)
	}
}

// prompt_template "dapo" wraps the problem in DAPO's instruction, the text
// the CDE paper's appendix prints (written out here, not taken from the
// code), before the suffix; a custom text holds {problem} once; a row
// that already holds the template's text is an error.
func TestMathPromptTemplate(t *testing.T) {
	task := newMath(t, map[string]any{"train": mathStyle, "chat_template": "none", "prompt_template": "dapo", "prompt_suffix": "!"})
	want := "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) " +
		"where $Answer is the answer to the problem.\n\nSolve $2x + 3 = 11$ for $x$.\n\nRemember to put your answer on its own line after \"Answer:\".!"
	if got := task.Train[1].Prompt; got != want {
		t.Fatalf("dapo: %q\nwant %q", got, want)
	}
	custom := newMath(t, map[string]any{"train": mathStyle, "chat_template": "none", "prompt_template": "Q: {problem}\nA:"})
	if got := custom.Train[1].Prompt; got != "Q: Solve $2x + 3 = 11$ for $x$.\nA:" {
		t.Fatalf("custom: %q", got)
	}
	dir := t.TempDir()
	wrapped := strings.TrimSuffix(want, "!")
	trainWrapped := strings.Replace(wrapped, "Solve $2x + 3 = 11$ for $x$.", "What is 2+2?", 1)
	templated := writeFile(t, dir, "dapo.jsonl", `{"prompt": "`+strings.ReplaceAll(strings.ReplaceAll(trainWrapped, "\n", `\n`), `"`, `\"`)+`", "answer": "4"}`+"\n")
	// The paper's layout: DAPO's templated training rows as they are, bare
	// eval problems wrapped by their entry's own template.
	mixed := newMath(t, map[string]any{"train": templated, "chat_template": "none",
		"eval": []any{map[string]any{"name": "m", "path": mathStyle, "prompt_template": "dapo"}}})
	if mixed.Train[0].Prompt != trainWrapped || mixed.EvalSets()[0].Problems[1].Prompt != wrapped {
		t.Fatalf("train %q, eval %q", mixed.Train[0].Prompt, mixed.EvalSets()[0].Problems[1].Prompt)
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"train": mathStyle, "prompt_template": "no placeholder"}, `task.prompt_template: want "", a name (dapo) or a text holding {problem} once`},
		{map[string]any{"train": mathStyle, "prompt_template": "{problem}{problem}"}, "task.prompt_template"},
		{map[string]any{"train": templated, "prompt_template": "dapo"}, "dapo.jsonl:1: the prompt already holds the text of the prompt_template"},
	} {
		c.m["name"] = "math"
		if _, err := New(core.NewParams("task", c.m)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.m, err, c.want)
		}
	}
}

// MATH-style JSONL: answer when given, else the solution's last \boxed{};
// "Level N" levels.
func TestMathStyle(t *testing.T) {
	task := newMath(t, map[string]any{"train": mathStyle})
	type pa struct {
		answer string
		level  int
	}
	want := []pa{{`\frac{5}{6}`, 1}, {"4", 2}, {`120^\circ`, 2}, {"12", 1}, {`\{-3, 3\}`, 3}, {"25", 3}}
	var got []pa
	for _, p := range task.Train {
		got = append(got, pa{p.Answer, p.Level})
		if _, ok := task.Verifier().Verify(p, p.Solution); !ok {
			t.Errorf("%s: solution %q does not verify against %q", p.ID, p.Solution, p.Answer)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if task.Train[2].Solution == "" || task.Train[0].Solution == "" {
		t.Fatal("solutions kept")
	}
}

// The Llama-3 template writes <|begin_of_text|> itself: the prompt ids
// start with it once.
func TestMathLlama3(t *testing.T) {
	if _, err := os.Stat(filepath.Join(llama3Dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip("run `npm ci` in tokenizer/testdata/gen: ", err)
	}
	task := newMath(t, map[string]any{"train": gsmTrain, "tokenizer": llama3Dir, "eos_token": "<|eot_id|>"})
	tok := task.Tokenizer()
	p := task.Train[0].Prompt
	if !strings.HasPrefix(p, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nNatalia") {
		t.Fatalf("prompt %q", p)
	}
	ids := core.EncodePrompt(tok, p)
	if ids[0] != 128000 || ids[1] != 128006 || tok.BOS() != -1 || tok.EOS() != 128009 || tok.PAD() != 128009 {
		t.Fatalf("ids %v, BOS %d EOS %d PAD %d", ids[:3], tok.BOS(), tok.EOS(), tok.PAD())
	}
	// chatml: the template's text decides, and it writes no BOS.
	cm := newMath(t, map[string]any{"train": gsmTrain, "tokenizer": llama3Dir, "chat_template": "chatml"})
	if ids := core.EncodePrompt(cm.Tokenizer(), cm.Train[0].Prompt); ids[0] == 128000 || cm.Tokenizer().EOS() != 128001 {
		t.Fatalf("chatml ids %v, EOS %d", ids[:3], cm.Tokenizer().EOS())
	}
	// none keeps the tokenizer's own BOS, added by EncodePrompt.
	plain := newMath(t, map[string]any{"train": gsmTrain, "tokenizer": llama3Dir, "chat_template": "none"})
	if ids := core.EncodePrompt(plain.Tokenizer(), plain.Train[0].Prompt); ids[0] != 128000 || ids[1] == 128000 {
		t.Fatalf("none ids %v", ids[:3])
	}
}

func TestMathConfigErrors(t *testing.T) {
	dir := t.TempDir()
	sysRow := writeFile(t, dir, "sys.jsonl", `{"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], "answer": "1"}`+"\n")
	overlap := writeFile(t, dir, "overlap.jsonl", `{"question": "`+strings.ReplaceAll(gsmRef(t, gsmTrain)[3].question, `"`, `\"`)+`", "answer": "#### 1"}`+"\n")
	noExt := writeFile(t, dir, "data.txt", `{"question": "Q", "answer": "1"}`+"\n")
	notParquet := writeFile(t, dir, "x.parquet", "not parquet at all")
	for _, c := range []struct {
		name string
		m    map[string]any
		want string
	}{
		{"no train", map[string]any{}, "task.train: required"},
		{"bad format", map[string]any{"train": gsmTrain, "format": "csv"}, `task.format: want auto, jsonl or parquet, got "csv"`},
		{"missing file", map[string]any{"train": filepath.Join(dir, "nope.jsonl")}, "task.train: open "},
		{"unknown extension", map[string]any{"train": noExt}, "data.txt: cannot tell the format"},
		{"not parquet", map[string]any{"train": notParquet}, "x.parquet: not a readable parquet file"},
		{"forced wrong format", map[string]any{"train": verlTrain, "format": "jsonl"}, "verl_gsm8k_train.parquet:1: invalid UTF-8"},
		{"unknown template", map[string]any{"train": gsmTrain, "chat_template": "vicuna"}, `task.chat_template: unknown chat template "vicuna"`},
		{"llama3 with char", map[string]any{"train": gsmTrain, "chat_template": "llama3"}, "task.chat_template: llama3 writes a BOS token"},
		{"eos with char", map[string]any{"train": gsmTrain, "eos_token": "x"}, "task.eos_token: the character tokenizer"},
		{"eos unknown", map[string]any{"train": gsmTrain, "tokenizer": qwen3Dir, "eos_token": "<|nope|>"}, `task.eos_token: "<|nope|>" is not a token`},
		{"tokenizer dir", map[string]any{"train": gsmTrain, "tokenizer": dir}, "task.tokenizer: open " + filepath.Join(dir, "tokenizer.json")},
		{"system twice", map[string]any{"train": sysRow, "system_prompt": "T"}, "sys.jsonl:1: the row has its own system message; leave task.system_prompt empty"},
		{"eval overlap", map[string]any{"train": gsmTrain, "eval": []any{map[string]any{"name": "o", "path": overlap}}}, "task.eval[0].path: problem overlap.jsonl:1: prompt also in the training file (train_head200.jsonl:4)"},
		{"eval no name", map[string]any{"train": gsmTrain, "eval": []any{map[string]any{"path": gsmTest}}}, "task.eval[0].name: required"},
		{"eval dup", map[string]any{"train": gsmTrain, "eval": []any{map[string]any{"name": "a", "path": gsmTest}, map[string]any{"name": "a", "path": gsmTest}}}, `task.eval[1].name: duplicate eval set name "a"`},
		{"eval unknown key", map[string]any{"train": gsmTrain, "eval": []any{map[string]any{"name": "a", "path": gsmTest, "split": "x"}}}, "task.eval[0].split: unknown key"},
		{"null ground truth", map[string]any{"train": filepath.Join("testdata", "math", "verl_null_ground_truth.parquet")}, "verl_null_ground_truth.parquet: row 3: no answer field"},
		{"answer key absent", map[string]any{"train": gsmTrain, "answer_key": "reward_model.ground_truth"}, `train_head200.jsonl:1: missing "reward_model.ground_truth" (the answer key)`},
		{"reward bound", map[string]any{"train": gsmTrain, "correct_reward": 1e7}, "task.correct_reward: must be in"},
		{"unknown key", map[string]any{"train": gsmTrain, "path": gsmTrain}, "task.path: unknown key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.m["name"] = "math"
			task, err := New(core.NewParams("task", c.m))
			if err == nil || !strings.Contains(err.Error(), c.want) || task != nil {
				t.Fatalf("err = %v\nwant one containing %q", err, c.want)
			}
		})
	}
}

// Malformed JSONL rows: each error names the file and line.
func TestMathJSONLMalformed(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"question": "Q", "answer": "#### 5"`, "bad JSON"},
		{`{"question": "Q", "answer": "1"} {"x": 1}`, "more than one JSON value"},
		{`null`, "want a JSON object, got null"},
		{`{"answer": "1"}`, `no prompt field (looked for "prompt", "question", "problem"; set the task's prompt_key)`},
		{`{"question": "Q"}`, `no answer field (looked for "reward_model.ground_truth", "answer", "solution"`},
		{`{"question": "  ", "answer": "1"}`, `empty "question"`},
		{`{"question": 5, "answer": "1"}`, `"question": want a string, got the number 5, or a list of {role, content} messages`},
		{`{"question": "Q", "answer": {"v": 1}}`, `"answer": want a string or number, got an object`},
		{`{"question": "Q", "answer": "####  "}`, `empty answer ("answer")`},
		{`{"problem": "Q", "solution": "no box here"}`, `"solution": no final answer found`},
		{`{"problem": "Q", "solution": "\\boxed{4"}`, `"solution": no final answer found`},
		{`{"prompt": [], "answer": "1"}`, `"prompt": empty message list`},
		{`{"prompt": ["hi"], "answer": "1"}`, `"prompt"[0]: want a {role, content} object, got`},
		{`{"prompt": [{"role": "user"}], "answer": "1"}`, `"prompt"[0]: missing "content"`},
		{`{"prompt": [{"role": "tool", "content": "x"}], "answer": "1"}`, `"prompt"[0]: role "tool"`},
		{`{"prompt": [{"role": "user", "content": "x"}, {"role": "system", "content": "s"}], "answer": "1"}`, `"prompt"[1]: a system message must come first`},
		{`{"prompt": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "a"}], "answer": "1"}`, `the last message is "assistant"`},
		{`{"prompt": [{"role": "user", "content": " "}], "answer": "1"}`, `"prompt": every message is empty`},
		{`{"question": "Q", "answer": "` + strings.Repeat("9", MaxAnswerBytes+1) + `"}`, "over the limit of 1024 bytes (tasks.MaxAnswerBytes)"},
		{`{"question": "` + strings.Repeat("q", MaxPromptBytes+1) + `", "answer": "1"}`, "(tasks.MaxPromptBytes)"},
	} {
		text := `{"question": "ok", "answer": "#### 1"}` + "\n\n" + c.line + "\n"
		_, err := ReadMathJSONL(strings.NewReader(text), "f.jsonl", MathKeys{})
		if err == nil || !strings.HasPrefix(err.Error(), "f.jsonl:3: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("line %.60q: err = %v\nwant f.jsonl:3: ...%s", c.line, err, c.want)
		}
	}
}

func TestMathKeysDotted(t *testing.T) {
	rows, err := ReadMathJSONL(strings.NewReader(`{"data": {"q": "Q?"}, "meta": {"gt": 7}}`), "f", MathKeys{Prompt: "data.q", Answer: "meta.gt"})
	if err != nil || len(rows) != 1 || rows[0].Answer != "7" || rows[0].Messages[0] != (Message{"user", "Q?"}) || rows[0].Row != 1 {
		t.Fatalf("%+v, %v", rows, err)
	}
}

// Parquet files written by parquet-go itself: a plain-text prompt column,
// and a malformed row named by its number; a truncated file is an error,
// not a panic.
func TestMathParquetWritten(t *testing.T) {
	type msg struct {
		Role    string `parquet:"role"`
		Content string `parquet:"content"`
	}
	type rm struct {
		GroundTruth string `parquet:"ground_truth"`
	}
	type row struct {
		Prompt      []msg `parquet:"prompt,list"`
		RewardModel rm    `parquet:"reward_model"`
	}
	type plain struct {
		Question string `parquet:"question"`
		Answer   int64  `parquet:"answer"`
	}
	dir := t.TempDir()
	write := func(name string, rows any) string {
		p := filepath.Join(dir, name)
		var err error
		switch r := rows.(type) {
		case []row:
			err = parquet.WriteFile(p, r)
		case []plain:
			err = parquet.WriteFile(p, r)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("plain.parquet", []plain{{"One?", 1}, {"Two?", 2}})
	rows, err := LoadMath(good, FormatParquet, MathKeys{})
	if err != nil || len(rows) != 2 || rows[1].Answer != "2" || rows[1].Messages[0].Content != "Two?" || rows[1].Row != 2 {
		t.Fatalf("%+v, %v", rows, err)
	}
	bad := write("bad.parquet", []row{
		{[]msg{{"user", "a"}}, rm{"1"}},
		{[]msg{{"user", "b"}, {"assistant", "c"}}, rm{"2"}},
	})
	if _, err := LoadMath(bad, FormatParquet, MathKeys{}); err == nil || !strings.Contains(err.Error(), `bad.parquet: row 2: "prompt": the last message is "assistant"`) {
		t.Fatalf("err = %v", err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "math", "verl_gsm8k_test.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(b) / 2, len(b) - 9, 100} {
		p := filepath.Join(dir, "cut.parquet")
		if err := os.WriteFile(p, b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadMath(p, FormatParquet, MathKeys{}); err == nil || !strings.Contains(err.Error(), "cut.parquet") {
			t.Fatalf("cut at %d: err = %v", cut, err)
		}
	}
}
