package rollout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/rollout/localserve"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// buildCDERun builds cde-run into a temporary directory.
func buildCDERun(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build cde-run with")
	}
	bin := filepath.Join(t.TempDir(), "cde-run")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/cde-run")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/cde-run: %v\n%s", err, out)
	}
	return bin
}

// killer kills a server when the trainer's progress bar first shows
// step 1 of 3 done.
type killer struct {
	once sync.Once
	kill func()
}

func (k *killer) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(" 1/3 ")) {
		k.once.Do(k.kill)
	}
	return len(p), nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Three training steps against two local `cde-run serve` processes, with
// weight sync into their reload directory after every update and truncated
// importance sampling; one server is killed after the first step. The run
// finishes, the live-server count drops from 2 to 1, the client warned
// naming the dead server, and the servers' log-probs agree with the
// trainer's recomputation at every step (so each step's reload gave them
// the trainer's weights: with weight_sync.every 0 the difference is far
// above the bound). Two models: cde's character transformer on arith
// (policy.gob reloads) and a tiny random Qwen3-architecture checkpoint with
// the real Qwen3 tokenizer on GSM8K-style prompts (model.safetensors
// reloads).
func TestTrainAgainstTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cde-run and starts servers (about a minute)")
	}
	bin := buildCDERun(t)
	const token = "e2e-token-not-logged"
	t.Setenv("CDE_SERVE_TOKEN", token)
	t.Run("char", func(t *testing.T) {
		reload := t.TempDir()
		base := []string{`model.checkpoint=""`, "rollout.max_response_tokens=8", "eval.max_problems=4",
			// A random policy is never right, so every advantage is 0: the
			// entropy bonus and a large step make each update move the weights.
			"train.entropy_coef=0.5", "train.actor_lr=0.05"}
		// The servers start from other weights (seed 7); the trainer's
		// first sync replaces them with its own.
		cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: append(base, "seed=7")})
		if err != nil {
			t.Fatal(err)
		}
		s, err := session.New(cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Backend.WriteServeWeights(reload, ""); err != nil {
			t.Fatal(err)
		}
		s.Close()
		trainAgainstServers(t, bin, reload, token, base, "--checkpoint", reload)
	})
	t.Run("qwen3", func(t *testing.T) {
		model := t.TempDir()
		if err := hftest.WriteTinyQwen3(model, filepath.Join("..", "tokenizer", "testdata", "qwen3"), 2, 5); err != nil {
			t.Fatal(err)
		}
		data := t.TempDir()
		// GSM8K training questions with their final answers (MIT licence:
		// tasks/testdata/gsm8k/train_head200.jsonl, LICENSE beside it).
		train := `{"question": "Joy can read 8 pages of a book in 20 minutes. How many hours will it take her to read 120 pages?", "answer": "#### 5"}
{"question": "Herbert is 10 years younger than Kris. If Kris is 24 years old now, how old will Herbert be next year?", "answer": "#### 15"}
`
		os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(train), 0o644)
		os.WriteFile(filepath.Join(data, "test.jsonl"), []byte(`{"question": "A box holds 12 eggs. How many eggs are in 4 boxes?", "answer": "#### 48"}`+"\n"), 0o644)
		task := fmt.Sprintf(`task={name: math, train: %s, eval: [{name: t, path: %s}], tokenizer: %s}`,
			filepath.Join(data, "train.jsonl"), filepath.Join(data, "test.jsonl"), model)
		base := []string{task, "model.hf=" + model, "model.max_len=128", "rollout.max_response_tokens=8", "eval.max_problems=1",
			"train.entropy_coef=0.5", "train.actor_lr=0.01"}
		// The servers start from the checkpoint itself, as the trainer does.
		trainAgainstServers(t, bin, t.TempDir(), token, base, "--model", model, "--max-len", "128")
	})
}

// trainAgainstServers starts two servers with serveArgs, trains 3 steps
// with the config sets plus the servers and sync keys, killing the first
// server after step 1 of 3, and checks the run (see TestTrainAgainstTwoServers).
func trainAgainstServers(t *testing.T, bin, reload, token string, sets []string, serveArgs ...string) {
	var procs []*localserve.Proc
	for range 2 {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--reload-dir", reload}, serveArgs...)
		p, err := localserve.Start(bin, 2*time.Minute, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill() })
		procs = append(procs, p)
	}
	sets = append(slices.Clone(sets), "train.steps=3", "train.prompts_per_step=2", "rollout.n=4", "eval.every=0", "eval.k=1",
		"train.checkpoint_every=10", fmt.Sprintf(`rollout.servers=[%q, %q]`, procs[0].URL, procs[1].URL),
		"rollout.weight_sync.dir="+reload, "rollout.tis_cap=2", "rollout.server_retries=1", "rollout.server_timeout=60s")
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuf
	run := filepath.Join(t.TempDir(), "run")
	k := &killer{kill: func() { procs[0].Kill() }}
	err = session.Train(context.Background(), session.TrainOptions{Config: cfg, RunDir: run,
		Output: session.Output{W: k, TTY: true}, Log: zerolog.New(&log)})
	if err != nil {
		t.Fatalf("train: %v\nclient log:\n%s\nserver 1 log:\n%s", err, log.String(), procs[1].Stderr())
	}
	rows := readRows(t, filepath.Join(run, "metrics.jsonl"))
	if len(rows) != 4 { // steps 0, 1, 2 and the final eval
		t.Fatalf("%d metrics rows, want 4", len(rows))
	}
	live := []float64{2, 1, 1}
	for step := range 3 {
		m := rows[step]
		t.Logf("step %d: servers_live %v, logprob_abs_diff %v, tis_weight_mean %v, gen_tokens_per_s %v, sync_s %v", step,
			m["rollout/servers_live"], m["rollout/logprob_abs_diff"], m["rollout/tis_weight_mean"], m["perf/gen_tokens_per_s"], m["perf/sync_s"])
		if got, _ := m["rollout/servers_live"].(float64); got != live[step] {
			t.Errorf("step %d: rollout/servers_live %v, want %v", step, m["rollout/servers_live"], live[step])
		}
		// Same weights on both sides: only float rounding between the
		// servers' KV-cache sampler and the trainer's scorer.
		if d, ok := m["rollout/logprob_abs_diff"].(float64); !ok || d > 1e-3 {
			t.Errorf("step %d: rollout/logprob_abs_diff %v, want <= 1e-3 (the servers hold the trainer's weights)", step, m["rollout/logprob_abs_diff"])
		}
		if w, ok := m["rollout/tis_weight_mean"].(float64); !ok || math.Abs(w-1) > 1e-2 {
			t.Errorf("step %d: rollout/tis_weight_mean %v, want about 1", step, m["rollout/tis_weight_mean"])
		}
		if _, ok := m["perf/sync_s"]; step < 2 && !ok {
			t.Errorf("step %d: no perf/sync_s", step)
		}
	}
	text := log.String()
	if !strings.Contains(text, `"level":"warn"`) || !strings.Contains(text, procs[0].URL) || !strings.Contains(text, "dropping server") {
		t.Errorf("no warning naming the killed server %s:\n%s", procs[0].URL, text)
	}
	if strings.Contains(text, token) {
		t.Errorf("the token was logged")
	}
}

func readRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	return rows
}
