package serve

import (
	"net/http"
	"strings"
	"testing"
)

// A body cut short says so (not "want a JSON object (EOF)"), and a key
// given twice in one object is refused, at the top and inside a value
// (encoding/json would keep the last silently).
func TestTruncatedAndDuplicateKeys(t *testing.T) {
	ts := newTestServer(t, charModel(t, 1), Options{})
	for _, c := range []struct{ path, body, want string }{
		{"/v1/completions", `{"prompt": "12+3", "max_tokens": 3`, "the body ends at byte 34, inside the JSON object: truncated"},
		{"/v1/completions", `{"prompt": "12+3", "max_tokens": `, "truncated"},
		{"/v1/completions", `{"prompt": "12`, "truncated"},
		{"/v1/completions", `{`, "truncated"},
		{"/v1/completions", ``, "request body: empty"},
		{"/v1/completions", `{"prompt": "12+3", "max_tokens": 3, "max_tokens": 5}`, "max_tokens: given twice in one JSON object"},
		{"/v1/completions", `{"prompt": "12+3", "prompt": "1+1"}`, "prompt: given twice in one JSON object"},
		{"/v1/completions", `{"prompt": "12+3", "logit_bias": {"5": 1, "5": 2}}`, "logit_bias.5: given twice"},
	} {
		status, out := post(t, ts.URL, c.path, c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "(EOF)") {
			t.Errorf("%s %q: %d %s, want 400 containing %q", c.path, c.body, status, out, c.want)
		}
	}
}

// A chat message's key given twice is refused, naming the message.
func TestChatDuplicateKeys(t *testing.T) {
	ts := newTestServer(t, tinyQwen3(t), Options{})
	status, out := post(t, ts.URL, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi", "role": "system"}]}`)
	if want := "messages[0].role: given twice"; status != http.StatusBadRequest || !strings.Contains(string(out), want) {
		t.Errorf("%d %s, want 400 containing %q", status, out, want)
	}
}

// The reload endpoint says truncated, and refuses model_path twice.
func TestReloadTruncatedAndDuplicate(t *testing.T) {
	f := newReloadFixture(t, Options{Token: "set", ReloadDir: "set"})
	auth := []string{"Authorization", "Bearer " + f.token}
	for _, c := range []struct{ body, want string }{
		{`{"model_path": "` + f.dir, "truncated"},
		{`{"model_path": "` + f.dir + `", "model_path": "/"}`, "model_path: given twice"},
	} {
		if status, out := post(t, f.url, "/update_weights_from_disk", c.body, auth...); status != http.StatusBadRequest || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: %d %s, want 400 containing %q", c.body, status, out, c.want)
		}
	}
}
