package serve

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/cde-rl/cde/tasks"
)

// FuzzReadCompletion: any body is answered without a panic, and a request
// that is accepted holds only what the model can take: ids in the
// vocabulary, each prompt with room for max_tokens, at most MaxRows rows,
// and a body of UTF-8.
func FuzzReadCompletion(f *testing.F) {
	for _, s := range []string{
		`{"prompt": [[1, 5]], "max_tokens": 2}`, `{"prompt": [1, 5, 6], "n": 3}`, `{"prompt": null}`,
		`{"prompt": [[1], [2, 3]], "stop_token_ids": [4], "logprobs": 1, "seed": 9}`, `{"prompt": [[]]}`,
		`{"prompt": [[1, [2]]]}`, `{"prompt": "text"}`, `{"prompt": [[1]]} {}`, `{"prompt": [[1e2, 3.0]]}`,
		"{\"prompt\": \"a\xffb\"}", `{"prompt": "\ud83d\ude00", "user": "u"}`, `{"prompt": ["a\ud800"]}`,
	} {
		f.Add([]byte(s))
	}
	m := &Model{Tokenizer: tasks.NewCharTokenizer(), Vocab: 101, MaxLen: 64, EOS: tasks.EosID}
	o := Options{MaxN: 8, MaxRows: 16}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := readCompletion(bytes.NewReader(body), m, o)
		if aerr != nil {
			if req != nil || aerr.msg == "" {
				t.Fatalf("error %+v with request %+v", aerr, req)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("a body that is not UTF-8 was accepted: %q", body)
		}
		if len(req.prompts)*req.n > o.MaxRows || req.n < 1 || req.maxTokens < 1 {
			t.Fatalf("accepted %d prompts x n %d, max_tokens %d", len(req.prompts), req.n, req.maxTokens)
		}
		for i, p := range req.prompts {
			if len(p) == 0 || (len(p)+3)/4*4+req.maxTokens > m.MaxLen {
				t.Fatalf("prompt %d: %d ids with max_tokens %d accepted", i, len(p), req.maxTokens)
			}
			for _, id := range p {
				if id < 0 || int(id) >= m.Vocab {
					t.Fatalf("prompt %d: id %d accepted", i, id)
				}
			}
		}
	})
}
