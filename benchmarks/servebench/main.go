// Command servebench times generation of one fixed request (16 prompts x n 8,
// up to 48 new tokens by default) in-process (xla.Backend.Generate) and
// through the remote-generation client (package rollout) against 1 and 2
// local `cde-run serve` processes, for cde's default character model and a
// tiny random Qwen3-architecture checkpoint, and prints generated tokens/s.
//
//	go run ./benchmarks/servebench                 # builds cde-run, both models
//	go run ./benchmarks/servebench --models char --reps 5
//
// Every mode gets one untimed warm-up request (graph compilation) and then
// --reps timed ones; the table shows the median. The servers run on this
// machine beside the client, so they share its cores: on a small machine
// two servers cannot run faster than one.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/hftest"
	"github.com/cde-rl/cde/backends/xla/safetensors"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/rollout"
	"github.com/cde-rl/cde/rollout/localserve"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/tokenizer"
	"github.com/cde-rl/cde/trainer"
)

func main() {
	bin := flag.String("bin", "", "cde-run binary (default: go build ./cmd/cde-run into a temporary directory)")
	models := flag.String("models", "char,qwen3", "models to time: char (the default config's transformer), qwen3 (tiny random Qwen3, 2 layers, vocab 151936)")
	nPrompts := flag.Int("prompts", 16, "distinct prompts")
	n := flag.Int("n", 8, "samples per prompt")
	maxTokens := flag.Int("max-tokens", 48, "new tokens per sample, at most")
	reps := flag.Int("reps", 3, "timed requests per mode (median reported)")
	engine := flag.String("engine", "auto", "compute engine of the in-process backend and the servers")
	modes := flag.String("servers", "0,1,2", "modes to time: 0 is in-process, k > 0 is k local servers")
	flag.Parse()
	var ks []int
	for _, f := range strings.Split(*modes, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 0 {
			fmt.Fprintf(os.Stderr, "--servers: %q: want a list of counts >= 0 such as 0,1,2\n", *modes)
			os.Exit(2)
		}
		ks = append(ks, k)
	}
	tmp, err := os.MkdirTemp("", "servebench-")
	check(err)
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "cde-run")
		out, err := exec.Command("go", "build", "-o", *bin, "./cmd/cde-run").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build ./cmd/cde-run (run from the repository root): %v\n%s", err, out)
			os.Exit(1)
		}
	}
	fmt.Printf("request: %d prompts x n %d, max_tokens %d, temperature 1; engine %s; %d reps (median), 1 warm-up\n\n",
		*nPrompts, *n, *maxTokens, *engine, *reps)
	fmt.Printf("| model | generation | tokens/request | s/request | tokens/s |\n|---|---|---|---|---|\n")
	for _, m := range strings.Split(*models, ",") {
		dir := filepath.Join(tmp, m)
		check(os.MkdirAll(dir, 0o755))
		var be *xla.Backend
		var prompts [][]int32
		var serveArgs []string
		var eos int32
		switch m {
		case "char":
			be, prompts, serveArgs, eos = charModel(dir, *engine, *nPrompts)
		case "qwen3":
			be, prompts, serveArgs, eos = qwenModel(dir, *engine, *nPrompts)
		default:
			fmt.Fprintf(os.Stderr, "--models: unknown model %q (char, qwen3)\n", m)
			os.Exit(2)
		}
		var req core.GenerateRequest
		for _, p := range prompts {
			for range *n {
				req.Prompts = append(req.Prompts, p)
			}
		}
		req.Temperature, req.MaxTokens, req.Seed = 1, *maxTokens, 1
		if slices.Contains(ks, 0) {
			row(m, "in-process", *reps, req, be)
		}
		be.Close()
		for _, k := range ks {
			if k == 0 {
				continue
			}
			var procs []*localserve.Proc
			var urls []string
			for range k {
				p, err := localserve.Start(*bin, 5*time.Minute, append([]string{"serve", "--addr", "127.0.0.1:0", "--engine", *engine}, serveArgs...)...)
				check(err)
				procs = append(procs, p)
				urls = append(urls, p.URL)
			}
			c, err := rollout.New(rollout.Options{Servers: urls, Timeout: 10 * time.Minute, EOS: eos, Log: zerolog.Nop()})
			check(err)
			row(m, fmt.Sprintf("%d local serve", k), *reps, req, c)
			for _, p := range procs {
				p.Kill()
			}
		}
	}
}

// row times reps requests after a warm-up and prints the median.
func row(model, mode string, reps int, req core.GenerateRequest, g core.Generator) {
	_, err := g.Generate(req)
	check(err)
	var secs []float64
	tokens := 0
	for i := range reps {
		req.Seed = uint64(i + 2)
		start := time.Now()
		gens, err := g.Generate(req)
		check(err)
		secs = append(secs, time.Since(start).Seconds())
		for _, x := range gens {
			tokens += len(x.Tokens)
		}
	}
	slices.Sort(secs)
	med := secs[len(secs)/2]
	perReq := float64(tokens) / float64(reps)
	fmt.Printf("| %s | %s | %.0f | %.3f | %.0f |\n", model, mode, perReq, med, perReq/med)
}

// charModel is the default config's transformer with random weights,
// saved for `serve --checkpoint`, and arith prompts.
func charModel(dir, engine string, nPrompts int) (*xla.Backend, [][]int32, []string, int32) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}})
	check(err)
	task, err := tasks.New(core.NewParams("task", cfg.Task))
	check(err)
	tok := task.Tokenizer()
	be, err := xla.New(xla.Options{Engine: engine, Policy: xla.ModelConfig{Vocab: tok.VocabSize(), Layers: cfg.Model.Layers,
		DModel: cfg.Model.DModel, Heads: cfg.Model.Heads, FF: cfg.Model.FF, MaxLen: cfg.Model.MaxLen},
		Seed: 1, ActorLR: 1e-4, PAD: tok.PAD(), EOS: tok.EOS()})
	check(err)
	check(be.WriteServeWeights(dir, ""))
	var prompts [][]int32
	for _, p := range task.SampleTrain(rand.New(rand.NewPCG(1, 2)), nPrompts) {
		prompts = append(prompts, core.EncodePrompt(tok, p.Prompt))
	}
	return be, prompts, []string{"--checkpoint", dir}, tok.EOS()
}

// qwenModel is a tiny random Qwen3 checkpoint (2 layers, width 16, the
// real vocabulary and tokenizer) and short arithmetic questions.
func qwenModel(dir, engine string, nPrompts int) (*xla.Backend, [][]int32, []string, int32) {
	check(hftest.WriteTinyQwen3(dir, filepath.Join("tokenizer", "testdata", "qwen3"), 2, 5))
	tok, err := tokenizer.Load(dir)
	check(err)
	hc, err := hf.LoadConfig(dir)
	check(err)
	set, err := safetensors.OpenDir(dir)
	check(err)
	defer set.Close()
	be, err := xla.New(xla.Options{Engine: engine, Policy: xla.HFModelConfig(hc, 128), HFWeights: set, Seed: 1, ActorLR: 1e-4,
		PAD: tok.EOS(), EOS: tok.EOS()})
	check(err)
	var prompts [][]int32
	for i := range nPrompts {
		prompts = append(prompts, tok.Encode(fmt.Sprintf("What is %d plus %d? Answer:", 10+3*i, 7+i)))
	}
	return be, prompts, []string{"--model", dir, "--max-len", "128"}, tok.EOS()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		os.Exit(1)
	}
}
