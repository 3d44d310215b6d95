// Command enginebench times the three computations of a training step —
// scoring (forward + per-token log-probs), one PPO actor Adam step, and
// KV-cache sampling — on cde's GoMLX engines ("cpu", "go") through the public
// API of backends/xla, and on the PyTorch reference in
// benchmarks/torchref/torch_ref.py, for one model shape. Engines are
// interleaved within each repetition so their samples are taken side by side.
//
//	go run ./benchmarks/enginebench --preset default
//	go run ./benchmarks/enginebench --preset d128 --json d128.json
//
// See benchmarks/README.md.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/core"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}

// Shape is a model size and a step shape.
type Shape struct {
	Vocab    int `json:"vocab"`
	Layers   int `json:"layers"`
	DModel   int `json:"d_model"`
	Heads    int `json:"heads"`
	FF       int `json:"ff"` // resolved feed-forward width (model.ff 0 = 4 d_model)
	MaxLen   int `json:"max_len"`
	Batch    int `json:"batch"`
	Prompt   int `json:"prompt"`
	Response int `json:"response"`
}

// presets: "default" is trainer.DefaultConfigYAML's model (2 layers, d_model 64,
// 4 heads, ff 4 d, max_len 64) with the char tokenizer's 101 ids and the
// default step (16 prompts x 8 responses = 128 rows, 11-token prompts as in
// backends/xla/bench_test.go, 32-token responses); "d128" is d_model 128 on
// 64 rows of 32 + 32 tokens.
var presets = map[string]Shape{
	"default": {Vocab: 101, Layers: 2, DModel: 64, Heads: 4, MaxLen: 64, Batch: 128, Prompt: 11, Response: 32},
	"d128":    {Vocab: 101, Layers: 2, DModel: 128, Heads: 4, MaxLen: 64, Batch: 64, Prompt: 32, Response: 32},
}

// The backend's padding rules (generate.go, score.go): Generate pads prompts to a
// multiple of 4, scoring and training pad sequences to a multiple of 8.
const (
	promptPad = 4
	seqPad    = 8
)

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Default actor update of trainer.DefaultConfigYAML.
const (
	actorLR     = 1e-4
	maxGradNorm = 1.0
	clipLow     = 0.2
	clipHigh    = 0.2
	temperature = 1.0
)

var measurements = []string{"score", "train", "sample"}

var measurementTitle = map[string]string{
	"score":  "score (forward + token log-probs)",
	"train":  "actor train step (PPO + Adam)",
	"sample": "KV-cache sampling",
}

type config struct {
	preset     string
	shape      Shape
	engines    []string
	torch      string
	python     string
	script     string
	threads    int
	warmup     int
	reps       int // 0 = per-engine defaults
	repsGo     int
	repsFast   int
	only       []string
	check      bool
	jsonPath   string
	seed       uint64
	quietWait  time.Duration
	settle     time.Duration
	retries    int
	progress   io.Writer
	stdout     io.Writer
	torchAvail bool
}

func defaultScript() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "torchref", "torch_ref.py")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return filepath.Join("benchmarks", "torchref", "torch_ref.py")
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("enginebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "default", "model and step shape: default | d128")
	vocab := fs.Int("vocab", 0, "vocabulary size (0 = preset)")
	layers := fs.Int("layers", 0, "transformer blocks (0 = preset)")
	dModel := fs.Int("d-model", 0, "residual width (0 = preset)")
	heads := fs.Int("heads", 0, "attention heads (0 = preset)")
	ff := fs.Int("ff", 0, "feed-forward width (0 = 4 d_model, as model.ff 0)")
	maxLen := fs.Int("max-len", 0, "position embeddings, model.max_len (0 = preset, raised to fit the step)")
	batch := fs.Int("batch", 0, "rows B (0 = preset)")
	prompt := fs.Int("prompt", 0, "prompt tokens (0 = preset)")
	response := fs.Int("response", 0, "response tokens (0 = preset)")
	engines := fs.String("engines", "cpu,go", "GoMLX engines to time (comma-separated: cpu, go, xla:cpu ...)")
	torch := fs.String("torch", "auto", "PyTorch reference: auto (if the python can import torch) | off | required")
	python := fs.String("python", "/usr/bin/python3", "python interpreter with torch")
	script := fs.String("torch-script", defaultScript(), "path of torch_ref.py")
	threads := fs.Int("threads", 2, "torch.set_num_threads for the reference")
	warmup := fs.Int("warmup", 1, "untimed repetitions per engine and measurement (the first compiles the graphs)")
	reps := fs.Int("reps", 0, "timed repetitions for every engine (0 = --reps-fast for cpu and torch, --reps-go for go)")
	repsFast := fs.Int("reps-fast", 5, "timed repetitions for cpu, torch and other engines when --reps is 0")
	repsGo := fs.Int("reps-go", 3, "timed repetitions for the go engine when --reps is 0")
	only := fs.String("only", strings.Join(measurements, ","), "measurements to run: score,train,sample")
	check := fs.Bool("check", true, "compare each engine's scoring and one actor step with the torch reference on the same weights")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file")
	seed := fs.Uint64("seed", 1, "weights and data seed")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	quietWait := fs.Duration("quiet-wait", 30*time.Second, "before each timed sample, wait up to this long for other processes to go idle (0 = never wait)")
	settleFlag := fs.Duration("settle", 50*time.Millisecond, "pause before each sample, after a forced GC, so the previous engine's threads go idle")
	retries := fs.Int("retries", 3, "redo a timed sample up to this many times when other processes used the CPU during it")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./benchmarks/enginebench [flags]\n\n"+
			"Times scoring, one actor train step and KV-cache sampling on cde's GoMLX engines\n"+
			"and the PyTorch reference (benchmarks/torchref/torch_ref.py), and prints medians\n"+
			"and time ratios. Presets: default (d_model 64, B=128, 11+32 tokens), d128\n"+
			"(d_model 128, B=64, 32+32 tokens).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	sh, ok := presets[*preset]
	if !ok {
		return nil, fmt.Errorf("--preset %q: want default or d128", *preset)
	}
	over := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	over(&sh.Vocab, *vocab)
	over(&sh.Layers, *layers)
	over(&sh.DModel, *dModel)
	over(&sh.Heads, *heads)
	over(&sh.FF, *ff)
	over(&sh.MaxLen, *maxLen)
	over(&sh.Batch, *batch)
	over(&sh.Prompt, *prompt)
	over(&sh.Response, *response)
	if sh.FF == 0 {
		sh.FF = 4 * sh.DModel
	}
	need := max(roundUp(sh.Prompt+sh.Response, seqPad), roundUp(sh.Prompt, promptPad)+sh.Response)
	if sh.MaxLen < need {
		if *maxLen > 0 {
			return nil, fmt.Errorf("--max-len %d < %d needed by prompt %d + response %d", *maxLen, need, sh.Prompt, sh.Response)
		}
		sh.MaxLen = need
	}
	if sh.DModel%sh.Heads != 0 {
		return nil, fmt.Errorf("d_model %d must be a multiple of heads %d", sh.DModel, sh.Heads)
	}
	if sh.Vocab < 4 {
		return nil, fmt.Errorf("vocab %d < 4", sh.Vocab)
	}
	switch *torch {
	case "auto", "off", "required":
	default:
		return nil, fmt.Errorf("--torch %q: want auto, off or required", *torch)
	}
	c := &config{preset: *preset, shape: sh, torch: *torch, python: *python, script: *script, threads: *threads,
		warmup: max(*warmup, 0), reps: *reps, repsGo: max(*repsGo, 1), repsFast: max(*repsFast, 1),
		check: *check, jsonPath: *jsonPath, seed: *seed, quietWait: *quietWait, settle: *settleFlag, retries: max(*retries, 0), progress: stderr}
	if *quiet {
		c.progress = io.Discard
	}
	for _, e := range strings.Split(*engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.engines = append(c.engines, e)
		}
	}
	for _, m := range strings.Split(*only, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if !slices.Contains(measurements, m) {
			return nil, fmt.Errorf("--only: unknown measurement %q (want score, train, sample)", m)
		}
		c.only = append(c.only, m)
	}
	return c, nil
}

func (c *config) repsFor(engine string) int {
	if c.reps > 0 {
		return c.reps
	}
	if engine == "go" {
		return c.repsGo
	}
	return c.repsFast
}

// ---------------------------------------------------------------- data

// rollout is a synthetic batch like backends/xla/bench_test.go's: random
// prompt and response tokens in [3, V), old log-probs -4.6, N(0,1)
// advantages.
func rollout(sh Shape, seed uint64) *core.Rollout {
	rng := rand.New(rand.NewPCG(seed, 2))
	r := &core.Rollout{}
	for i := range sh.Batch {
		s := core.Sequence{Group: i / 8, Prompt: make([]int32, sh.Prompt), Response: make([]int32, sh.Response)}
		for j := range s.Prompt {
			s.Prompt[j] = int32(3 + rng.IntN(sh.Vocab-3))
		}
		for j := range s.Response {
			s.Response[j] = int32(3 + rng.IntN(sh.Vocab-3))
			s.LogProbs = append(s.LogProbs, -4.6)
			s.Advantages = append(s.Advantages, rng.NormFloat64())
		}
		r.Seqs = append(r.Seqs, s)
	}
	return r
}

func seqPtrs(r *core.Rollout) []*core.Sequence {
	out := make([]*core.Sequence, len(r.Seqs))
	for i := range r.Seqs {
		out[i] = &r.Seqs[i]
	}
	return out
}

func actorUpdate(seed uint64) core.ActorUpdate {
	return core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: clipLow, ClipHigh: clipHigh, Temperature: temperature, Seed: seed}
}

func newBackend(engine string, sh Shape, seed uint64) (*xla.Backend, error) {
	return xla.New(xla.Options{
		Engine: engine,
		Policy: xla.ModelConfig{Vocab: sh.Vocab, Layers: sh.Layers, DModel: sh.DModel, Heads: sh.Heads, FF: sh.FF, MaxLen: sh.MaxLen},
		Seed:   seed, ActorLR: actorLR, CriticLR: 1e-3, MaxGradNorm: maxGradNorm,
		// EOS -1 is never sampled, so every row generates exactly Response tokens.
		PAD: 0, EOS: -1,
	})
}

// ---------------------------------------------------------------- runners

type runner interface {
	Name() string
	Run(op string, rep int) (seconds float64, err error)
	Close()
}

type goRunner struct {
	engine  string
	be      *xla.Backend
	sh      Shape
	r       *core.Rollout
	seqs    []*core.Sequence
	prompts [][]int32
}

func newGoRunner(engine string, sh Shape, seed uint64) (*goRunner, error) {
	be, err := newBackend(engine, sh, seed)
	if err != nil {
		return nil, err
	}
	r := rollout(sh, seed)
	g := &goRunner{engine: engine, be: be, sh: sh, r: r, seqs: seqPtrs(r)}
	for _, s := range r.Seqs {
		g.prompts = append(g.prompts, s.Prompt)
	}
	return g, nil
}

func (g *goRunner) Name() string { return g.engine }
func (g *goRunner) Close()       { g.be.Close() }

func (g *goRunner) Run(op string, rep int) (float64, error) {
	var err error
	start := time.Now()
	switch op {
	case "score":
		_, _, err = g.be.ScoreLogProbs(g.seqs, temperature)
	case "train":
		_, err = g.be.UpdateActor(g.r, actorUpdate(uint64(rep)))
	case "sample":
		var gens []core.Generation
		gens, err = g.be.Generate(core.GenerateRequest{Prompts: g.prompts, Temperature: temperature, MaxTokens: g.sh.Response, Seed: uint64(rep)})
		elapsed := time.Since(start).Seconds()
		if err == nil {
			for i, gen := range gens {
				if len(gen.Tokens) != g.sh.Response {
					return 0, fmt.Errorf("generate: row %d has %d tokens, want %d", i, len(gen.Tokens), g.sh.Response)
				}
			}
		}
		return elapsed, err
	default:
		return 0, fmt.Errorf("unknown measurement %q", op)
	}
	return time.Since(start).Seconds(), err
}

// torchRunner drives torch_ref.py --serve: one stdin line per repetition,
// one JSON line back with the time measured inside Python.
type torchRunner struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	info TorchInfo
}

// TorchInfo is what torch_ref.py reports about itself.
type TorchInfo struct {
	TorchVersion string         `json:"torch_version"`
	Python       string         `json:"python"`
	Threads      int            `json:"threads"`
	BLAS         map[string]any `json:"blas"`
	Config       map[string]any `json:"config"`
	ParamCount   int            `json:"param_count"`
}

func (t *TorchInfo) blasName() string {
	if s, ok := t.BLAS["blas"].(string); ok {
		return s
	}
	return "unknown"
}

func torchArgs(c *config) []string {
	sh := c.shape
	return []string{c.script,
		"--vocab", fmt.Sprint(sh.Vocab), "--layers", fmt.Sprint(sh.Layers), "--d-model", fmt.Sprint(sh.DModel),
		"--heads", fmt.Sprint(sh.Heads), "--ff", fmt.Sprint(sh.FF), "--max-len", fmt.Sprint(sh.MaxLen),
		"--batch", fmt.Sprint(sh.Batch), "--prompt", fmt.Sprint(sh.Prompt), "--response", fmt.Sprint(sh.Response),
		"--prompt-pad", fmt.Sprint(promptPad), "--seq-pad", fmt.Sprint(seqPad), "--threads", fmt.Sprint(c.threads),
		"--lr", fmt.Sprint(actorLR), "--max-grad-norm", fmt.Sprint(maxGradNorm),
		"--clip-low", fmt.Sprint(clipLow), "--clip-high", fmt.Sprint(clipHigh), "--temperature", fmt.Sprint(temperature),
		"--seed", fmt.Sprint(c.seed)}
}

func newTorchRunner(c *config) (*torchRunner, error) {
	cmd := exec.Command(c.python, append(torchArgs(c), "--serve")...)
	cmd.Stderr = c.progress
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t := &torchRunner{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	t.out.Buffer(make([]byte, 1<<16), 1<<24)
	if !t.out.Scan() {
		t.Close()
		return nil, fmt.Errorf("torch_ref.py --serve exited before reporting (see stderr above)")
	}
	if err := json.Unmarshal(t.out.Bytes(), &t.info); err != nil {
		t.Close()
		return nil, fmt.Errorf("torch_ref.py info line: %w", err)
	}
	return t, nil
}

func (t *torchRunner) Name() string { return "torch" }

func (t *torchRunner) Run(op string, _ int) (float64, error) {
	if _, err := fmt.Fprintln(t.in, op); err != nil {
		return 0, err
	}
	if !t.out.Scan() {
		return 0, fmt.Errorf("torch_ref.py stopped answering")
	}
	var reply struct {
		Op      string  `json:"op"`
		Seconds float64 `json:"seconds"`
		Error   string  `json:"error"`
	}
	if err := json.Unmarshal(t.out.Bytes(), &reply); err != nil {
		return 0, fmt.Errorf("torch_ref.py reply %q: %w", t.out.Text(), err)
	}
	if reply.Error != "" {
		return 0, fmt.Errorf("torch_ref.py %s: %s", op, reply.Error)
	}
	return reply.Seconds, nil
}

func (t *torchRunner) Close() {
	fmt.Fprintln(t.in, "quit")
	t.in.Close()
	t.cmd.Wait()
}

func torchImportable(python string) (bool, string) {
	out, err := exec.Command(python, "-c", "import torch; print(torch.__version__)").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return false, fmt.Sprintf("%s cannot import torch (%v: %s)", python, err, msg)
	}
	return true, strings.TrimSpace(string(out))
}

// ---------------------------------------------------------------- parameters

// savedVar is a variable of the policy.gob that Backend.Save writes, as
// xla.ReadSavedVariables reads it back (the public API's way to the GoMLX
// context's variables).
type savedVar struct {
	Dims []int
	Data []float32
}

// modelVars saves be and returns its model variables (not the Adam moments)
// by GoMLX scope and name, e.g. "/layer0/wq".
func modelVars(be *xla.Backend, dir string) (map[string]savedVar, error) {
	if err := be.Save(dir); err != nil {
		return nil, err
	}
	vars, err := xla.ReadSavedVariables(filepath.Join(dir, "policy.gob"))
	if err != nil {
		return nil, fmt.Errorf("reading %s/policy.gob: %w", dir, err)
	}
	out := map[string]savedVar{}
	for name, v := range vars {
		if !strings.HasPrefix(name, "/adam") {
			out[name] = savedVar{v.Dims, v.Data}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s/policy.gob holds no model variables", dir)
	}
	return out, nil
}

func countParams(vars map[string]savedVar) int {
	n := 0
	for _, v := range vars {
		size := 1
		for _, d := range v.Dims {
			size *= d
		}
		n += size
	}
	return n
}

// formulaParams counts model.go's initParams variables for the policy.
func formulaParams(sh Shape) int {
	d, f := sh.DModel, sh.FF
	perLayer := 2*d + 4*d*d + 2*d + d*f + f + f*d + d
	return sh.Vocab*d + sh.MaxLen*d + sh.Layers*perLayer + 2*d + d*sh.Vocab
}

// ---------------------------------------------------------------- check

// CheckResult compares one engine with the torch reference on the same
// weights and batch.
type CheckResult struct {
	Engine                string             `json:"engine"`
	ScoreLogProbMaxDiff   float64            `json:"score_logprob_max_abs_diff"`
	ScoreEntropyMaxDiff   float64            `json:"score_entropy_max_abs_diff"`
	TrainMetricMaxRelDiff float64            `json:"train_metric_max_rel_diff"`
	TrainParamMaxDiff     float64            `json:"train_param_max_abs_diff"`
	TrainParamFracBig     float64            `json:"train_param_frac_diff_gt_lr_over_10"`
	TrainMetricsGo        map[string]float64 `json:"train_metrics_go"`
	TrainMetricsTorch     map[string]float64 `json:"train_metrics_torch"`
	TorchParamCount       int                `json:"param_count"`
	Error                 string             `json:"error,omitempty"`
}

func writeVars(path string, names []string, vars map[string]savedVar) ([]map[string]any, error) {
	var buf []byte
	var manifest []map[string]any
	off := 0
	for _, name := range names {
		v := vars[name]
		manifest = append(manifest, map[string]any{"name": name, "dims": v.Dims, "offset": off})
		for _, x := range v.Data {
			b := math.Float32bits(x)
			buf = append(buf, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
		}
		off += len(v.Data)
	}
	return manifest, os.WriteFile(path, buf, 0o644)
}

// checkEngine runs scoring and one actor step on a fresh backend, writes the
// weights before and after and the batch, and has torch_ref.py --check
// redo both on the same weights. The batch's old log-probs are the scored
// ones plus N(0, 0.3) noise so the clipped branch of the surrogate is used.
func checkEngine(c *config, engine string) (*CheckResult, error) {
	sh := c.shape
	dir, err := os.MkdirTemp("", "enginebench-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	be, err := newBackend(engine, sh, c.seed)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	init, err := modelVars(be, filepath.Join(dir, "init"))
	if err != nil {
		return nil, err
	}
	r := rollout(sh, c.seed+7)
	lps, ents, err := be.ScoreLogProbs(seqPtrs(r), temperature)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.seed, 9))
	for i := range r.Seqs {
		for t := range r.Seqs[i].LogProbs {
			r.Seqs[i].LogProbs[t] = lps[i][t] + 0.3*rng.NormFloat64()
		}
	}
	metrics, err := be.UpdateActor(r, actorUpdate(1))
	if err != nil {
		return nil, err
	}
	after, err := modelVars(be, filepath.Join(dir, "after"))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(init))
	for n := range init {
		names = append(names, n)
	}
	sort.Strings(names)
	varList, err := writeVars(filepath.Join(dir, "init.bin"), names, init)
	if err != nil {
		return nil, err
	}
	if _, err := writeVars(filepath.Join(dir, "after.bin"), names, after); err != nil {
		return nil, err
	}
	var prompts, responses [][]int32
	var old, adv [][]float64
	for _, s := range r.Seqs {
		prompts = append(prompts, s.Prompt)
		responses = append(responses, s.Response)
		old = append(old, s.LogProbs)
		adv = append(adv, s.Advantages)
	}
	man := map[string]any{
		"engine": engine,
		"config": map[string]any{"vocab": sh.Vocab, "layers": sh.Layers, "d_model": sh.DModel, "heads": sh.Heads,
			"ff": sh.FF, "max_len": sh.MaxLen, "seq_pad": seqPad},
		"vars": varList, "init_file": "init.bin", "after_file": "after.bin",
		"prompts": prompts, "responses": responses, "old_logprobs": old, "advantages": adv,
		"temperature": temperature, "score_logprobs": lps, "score_entropies": ents,
		"update": map[string]any{"lr": actorLR, "max_grad_norm": maxGradNorm, "clip_low": clipLow, "clip_high": clipHigh,
			"ent_coef": 0.0, "kl_coef": 0.0, "temperature": temperature},
		"train_metrics": metrics,
	}
	data, err := json.Marshal(man)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(c.python, c.script, "--check", dir, "--threads", fmt.Sprint(c.threads))
	cmd.Stderr = c.progress
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("torch_ref.py --check: %w", err)
	}
	res := &CheckResult{}
	if err := json.Unmarshal(out, res); err != nil {
		return nil, fmt.Errorf("torch_ref.py --check output: %w", err)
	}
	res.Engine = engine
	return res, nil
}

// ---------------------------------------------------------------- results

// Stat holds one engine's samples of one measurement.
type Stat struct {
	FirstCallS float64   `json:"first_call_s,omitempty"` // includes graph compilation
	WarmupS    []float64 `json:"warmup_s"`
	SamplesS   []float64 `json:"samples_s"`
	MedianS    float64   `json:"median_s"`
	TokensPerS float64   `json:"tokens_per_s_median,omitempty"`
	MinS       float64   `json:"min_s"`
	MaxS       float64   `json:"max_s"`
	// OtherCPUS[i] is the CPU time other processes used during sample i
	// (-1 when unknown); Retried counts samples redone because it was high.
	OtherCPUS []float64 `json:"other_cpu_s"`
	Retried   int       `json:"retried"`
}

// Report is the --json output.
type Report struct {
	Preset           string                        `json:"preset"`
	Shape            Shape                         `json:"shape"`
	ScoreSeqLen      int                           `json:"score_seq_len"`
	SamplePromptLen  int                           `json:"sample_prompt_len"`
	Engines          []string                      `json:"engines"`
	EngineInfo       map[string]string             `json:"engine_info"`
	GoMaxProcs       int                           `json:"gomaxprocs"`
	Torch            *TorchInfo                    `json:"torch,omitempty"`
	TorchSkipped     string                        `json:"torch_skipped,omitempty"`
	ParamsGoContext  int                           `json:"params_go_context"`
	ParamsGoFormula  int                           `json:"params_go_formula"`
	ParamsTorch      int                           `json:"params_torch,omitempty"`
	Checks           []*CheckResult                `json:"checks,omitempty"`
	Results          map[string]map[string]*Stat   `json:"results"` // measurement -> engine -> stat
	Ratios           map[string]map[string]float64 `json:"ratios"`  // measurement -> "a/b" -> median time a / median time b
	Warmup           int                           `json:"warmup"`
	Reps             map[string]int                `json:"reps"`
	TimestampRFC3339 string                        `json:"timestamp"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's 1-minute load before
	// and after the run (other work on the machine skews every sample).
	LoadAvgStart float64 `json:"loadavg_1m_start"`
	LoadAvgEnd   float64 `json:"loadavg_1m_end"`
	// OtherCPUCores is the CPU time used by everything but this process and
	// the torch reference from the first to the last repetition (waits for
	// a quiet machine included), in cores (CPU seconds per wall second); -1
	// when /proc is unavailable.
	OtherCPUCores float64 `json:"other_cpu_cores"`
}

// cpuSample is the machine's busy CPU time and ours (this process and the
// torch child), in clock ticks, at one instant.
type cpuSample struct {
	at          time.Time
	busy, owned float64
	ok          bool
}

const clockTicks = 100 // USER_HZ on Linux

func sampleCPU(pids []int) cpuSample {
	s := cpuSample{at: time.Now()}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	// user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		var x float64
		fmt.Sscan(v, &x)
		s.busy += x
	}
	for _, p := range append([]int{os.Getpid()}, pids...) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return s
		}
		// Fields after the ")" of the command name: state is field 3; utime
		// and stime are fields 14 and 15.
		rest := string(data)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		pf := strings.Fields(rest)
		if len(pf) < 13 {
			return s
		}
		var ut, st float64
		fmt.Sscan(pf[11], &ut)
		fmt.Sscan(pf[12], &st)
		s.owned += ut + st
	}
	s.ok = true
	return s
}

// otherSecondsSince is the CPU time used by other processes since start
// (-1 when unknown). Accounting is in 10 ms ticks.
func (s cpuSample) otherSecondsSince(start cpuSample) float64 {
	if !s.ok || !start.ok {
		return -1
	}
	return max((s.busy-start.busy)-(s.owned-start.owned), 0) / clockTicks
}

// contaminated reports whether other processes took enough CPU during a
// sample of wall seconds to skew it: more than 3 ticks of slack plus 15% of
// a core.
func contaminated(other, wall float64) bool {
	return other > 0.03+0.15*wall
}

// settle runs before every sample: a full garbage collection, so no GC
// cycle of this process overlaps the next sample (of any engine: the torch
// process competes for the same cores), then a pause for the other
// process's worker threads (OpenMP spin-waits, Go's idle spinning) to go
// to sleep.
func settle(c *config) {
	runtime.GC()
	if c.settle > 0 {
		time.Sleep(c.settle)
	}
}

// waitQuiet waits (up to c.quietWait) until other processes use less than a
// tenth of a core over a 250 ms window.
func waitQuiet(c *config, pids []int, logf func(string, ...any)) {
	if c.quietWait <= 0 {
		return
	}
	deadline := time.Now().Add(c.quietWait)
	warned := false
	for {
		start := sampleCPU(pids)
		time.Sleep(250 * time.Millisecond)
		other := sampleCPU(pids).otherSecondsSince(start)
		if other < 0 || other < 0.025 {
			return
		}
		if time.Now().After(deadline) {
			logf("enginebench: machine still busy after %v (other processes at %.2f cores): measuring anyway", c.quietWait, other/0.25)
			return
		}
		if !warned {
			logf("enginebench: other processes use %.2f cores: waiting for a quiet machine (up to %v)", other/0.25, c.quietWait)
			warned = true
		}
	}
}

func (s cpuSample) otherCoresSince(start cpuSample) float64 {
	wall := s.at.Sub(start.at).Seconds()
	if !s.ok || !start.ok || wall <= 0 {
		return -1
	}
	other := (s.busy - start.busy) - (s.owned - start.owned)
	return max(other, 0) / clockTicks / wall
}

// loadAvg returns the 1-minute load average (0 where /proc is missing).
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(data), &l)
	return l
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ---------------------------------------------------------------- main

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	c.stdout = stdout
	sh := c.shape
	rep := &Report{Preset: c.preset, Shape: sh, ScoreSeqLen: min(roundUp(sh.Prompt+sh.Response, seqPad), sh.MaxLen),
		SamplePromptLen: roundUp(sh.Prompt, promptPad), Engines: slices.Clone(c.engines),
		EngineInfo: map[string]string{}, GoMaxProcs: runtime.GOMAXPROCS(0), Results: map[string]map[string]*Stat{},
		Ratios: map[string]map[string]float64{}, Warmup: c.warmup, Reps: map[string]int{},
		TimestampRFC3339: time.Now().Format(time.RFC3339), LoadAvgStart: loadAvg()}
	logf := func(format string, a ...any) { fmt.Fprintf(c.progress, format+"\n", a...) }
	if rep.LoadAvgStart >= 0.5 {
		logf("enginebench: warning: 1-minute load average is %.2f before starting: other work will skew the timings", rep.LoadAvgStart)
	}

	// The torch reference.
	switch c.torch {
	case "auto", "required":
		ok, msg := torchImportable(c.python)
		if ok {
			if _, err := os.Stat(c.script); err != nil {
				ok, msg = false, fmt.Sprintf("torch script %s: %v", c.script, err)
			}
		}
		if !ok {
			if c.torch == "required" {
				return fmt.Errorf("--torch required: %s", msg)
			}
			rep.TorchSkipped = msg
		} else {
			c.torchAvail = true
		}
	default:
		rep.TorchSkipped = "--torch off"
	}

	// Parameter count from the GoMLX context (through a saved checkpoint).
	var runners []runner
	defer func() {
		for _, r := range runners {
			r.Close()
		}
	}()
	rep.ParamsGoFormula = formulaParams(sh)
	for _, e := range c.engines {
		logf("enginebench: building engine %s", e)
		g, err := newGoRunner(e, sh, c.seed)
		if err != nil {
			return fmt.Errorf("engine %s: %w", e, err)
		}
		runners = append(runners, g)
		rep.EngineInfo[e] = g.be.Engine()
		if rep.ParamsGoContext == 0 {
			dir, err := os.MkdirTemp("", "enginebench-params-")
			if err != nil {
				return err
			}
			vars, err := modelVars(g.be, dir)
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			rep.ParamsGoContext = countParams(vars)
		}
	}
	if c.torchAvail {
		logf("enginebench: starting %s %s --serve", c.python, c.script)
		t, err := newTorchRunner(c)
		if err != nil {
			return fmt.Errorf("torch: %w", err)
		}
		runners = append(runners, t)
		rep.Torch = &t.info
		rep.ParamsTorch = t.info.ParamCount
		rep.EngineInfo["torch"] = fmt.Sprintf("PyTorch %s, %d threads, BLAS %s", t.info.TorchVersion, t.info.Threads, t.info.blasName())
		if c.check {
			for _, e := range c.engines {
				logf("enginebench: checking %s against torch on the same weights", e)
				res, err := checkEngine(c, e)
				if err != nil {
					res = &CheckResult{Engine: e, Error: err.Error()}
					logf("enginebench: check %s: %v", e, err)
				}
				rep.Checks = append(rep.Checks, res)
			}
		}
	}
	if rep.ParamsGoContext == 0 && len(c.engines) == 0 {
		rep.ParamsGoContext = rep.ParamsGoFormula
	}
	for _, r := range runners {
		rep.Reps[r.Name()] = c.repsFor(r.Name())
	}

	var pids []int
	for _, r := range runners {
		if t, ok := r.(*torchRunner); ok {
			pids = append(pids, t.cmd.Process.Pid)
		}
	}
	cpuStart := sampleCPU(pids)

	// Interleaved repetitions: for each measurement, rep k of every engine
	// runs before rep k+1 of any.
	for _, op := range c.only {
		rep.Results[op] = map[string]*Stat{}
		maxReps := 0
		for _, r := range runners {
			rep.Results[op][r.Name()] = &Stat{}
			maxReps = max(maxReps, c.warmup+c.repsFor(r.Name()))
		}
		for k := range maxReps {
			for _, r := range runners {
				total := c.warmup + c.repsFor(r.Name())
				if k >= total {
					continue
				}
				st := rep.Results[op][r.Name()]
				timed := k >= c.warmup
				if timed {
					waitQuiet(c, pids, logf)
				}
				var s, other float64
				for try := 0; ; try++ {
					settle(c)
					before := sampleCPU(pids)
					var err error
					s, err = r.Run(op, k)
					if err != nil {
						return fmt.Errorf("%s %s: %w", r.Name(), op, err)
					}
					other = sampleCPU(pids).otherSecondsSince(before)
					if !timed || !contaminated(other, s) || try >= c.retries {
						break
					}
					st.Retried++
					logf("enginebench: %-6s %-6s rep %d: other processes used %.0f ms CPU during %.0f ms: retrying", op, r.Name(), k-c.warmup+1, other*1e3, s*1e3)
					waitQuiet(c, pids, logf)
				}
				phase := fmt.Sprintf("rep %d/%d", k-c.warmup+1, c.repsFor(r.Name()))
				if !timed {
					phase = fmt.Sprintf("warmup %d/%d", k+1, c.warmup)
					st.WarmupS = append(st.WarmupS, s)
				} else {
					st.SamplesS = append(st.SamplesS, s)
					st.OtherCPUS = append(st.OtherCPUS, other)
				}
				if k == 0 {
					st.FirstCallS = s
				}
				logf("enginebench: %-6s %-6s %-12s %9.2f ms", op, r.Name(), phase, s*1e3)
			}
		}
		for _, r := range runners {
			st := rep.Results[op][r.Name()]
			st.MedianS = median(st.SamplesS)
			st.MinS, st.MaxS = slices.Min(st.SamplesS), slices.Max(st.SamplesS)
			if op == "sample" {
				st.TokensPerS = float64(sh.Batch*sh.Response) / st.MedianS
			}
		}
		rep.Ratios[op] = map[string]float64{}
		for i, a := range runners {
			for _, b := range runners[i+1:] {
				rep.Ratios[op][a.Name()+"/"+b.Name()] = rep.Results[op][a.Name()].MedianS / rep.Results[op][b.Name()].MedianS
			}
		}
	}

	rep.LoadAvgEnd = loadAvg()
	rep.OtherCPUCores = sampleCPU(pids).otherCoresSince(cpuStart)
	names := make([]string, len(runners))
	for i, r := range runners {
		names[i] = r.Name()
	}
	printReport(stdout, c, rep, names)
	if c.jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.jsonPath, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", c.jsonPath)
	}
	return nil
}

func printReport(w io.Writer, c *config, rep *Report, names []string) {
	sh := rep.Shape
	fmt.Fprintf(w, "preset %s: vocab %d, layers %d, d_model %d, heads %d, ff %d, max_len %d; B=%d rows, prompt %d + response %d tokens\n",
		rep.Preset, sh.Vocab, sh.Layers, sh.DModel, sh.Heads, sh.FF, sh.MaxLen, sh.Batch, sh.Prompt, sh.Response)
	fmt.Fprintf(w, "  score/train batch [%d, %d] (padded to x%d); sampling: prompt padded to %d, KV cache %d positions, %d tokens per row\n",
		sh.Batch, rep.ScoreSeqLen, seqPad, rep.SamplePromptLen, rep.SamplePromptLen+sh.Response, sh.Response)
	paramLine := fmt.Sprintf("parameters: go (GoMLX context variables) %d, go (model.go formula) %d", rep.ParamsGoContext, rep.ParamsGoFormula)
	if rep.Torch != nil {
		verdict := "EQUAL"
		if rep.ParamsTorch != rep.ParamsGoContext || rep.ParamsGoFormula != rep.ParamsGoContext {
			verdict = "MISMATCH"
		}
		paramLine += fmt.Sprintf(", torch %d: %s", rep.ParamsTorch, verdict)
	}
	fmt.Fprintln(w, paramLine)
	for _, n := range names {
		fmt.Fprintf(w, "  %-6s %s\n", n, rep.EngineInfo[n])
	}
	fmt.Fprintf(w, "  GOMAXPROCS %d; warmup %d; reps %s; load average (1 min) %.2f before, %.2f after\n",
		rep.GoMaxProcs, rep.Warmup, repsString(rep.Reps, names), rep.LoadAvgStart, rep.LoadAvgEnd)
	if rep.TorchSkipped != "" {
		fmt.Fprintf(w, "torch: skipped (%s)\n", rep.TorchSkipped)
	}
	for _, ck := range rep.Checks {
		if ck.Error != "" {
			fmt.Fprintf(w, "check %s vs torch: FAILED: %s\n", ck.Engine, ck.Error)
			continue
		}
		fmt.Fprintf(w, "check %s vs torch (same weights): score max|dlogp| %.2g, max|dentropy| %.2g; one actor step: metrics max rel diff %.2g (grad_norm %.6g vs %.6g), weights max|d| %.2g (lr %.0e), %.4f%% of weights differ by > lr/10\n",
			ck.Engine, ck.ScoreLogProbMaxDiff, ck.ScoreEntropyMaxDiff, ck.TrainMetricMaxRelDiff,
			ck.TrainMetricsGo["actor/grad_norm"], ck.TrainMetricsTorch["actor/grad_norm"],
			ck.TrainParamMaxDiff, actorLR, 100*ck.TrainParamFracBig)
	}
	fmt.Fprintln(w)
	// Table.
	header := fmt.Sprintf("%-36s %-6s", "measurement (median)", "unit")
	for _, n := range names {
		header += fmt.Sprintf(" %10s", n)
	}
	var pairs []string
	for i, a := range names {
		for _, b := range names[i+1:] {
			pairs = append(pairs, a+"/"+b)
		}
	}
	for _, p := range pairs {
		header += fmt.Sprintf(" %10s", p)
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, strings.Repeat("-", len(header)))
	for _, op := range c.only {
		res := rep.Results[op]
		line := fmt.Sprintf("%-36s %-6s", measurementTitle[op], "ms")
		for _, n := range names {
			line += fmt.Sprintf(" %10.2f", res[n].MedianS*1e3)
		}
		for _, p := range pairs {
			line += fmt.Sprintf(" %10.3f", rep.Ratios[op][p])
		}
		fmt.Fprintln(w, line)
		if op == "sample" {
			line := fmt.Sprintf("%-36s %-6s", "  sampling throughput", "tok/s")
			for _, n := range names {
				line += fmt.Sprintf(" %10.0f", res[n].TokensPerS)
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w, "ratios are median-time ratios a/b: < 1 means a is faster.")
	var parts []string
	skewed := 0
	for _, n := range names {
		retried, worst := 0, 0.0
		for _, op := range c.only {
			st := rep.Results[op][n]
			retried += st.Retried
			for i, o := range st.OtherCPUS {
				if o >= 0 {
					worst = max(worst, o/st.SamplesS[i])
					if contaminated(o, st.SamplesS[i]) {
						skewed++
					}
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d retried, worst kept %.2f cores", n, retried, worst))
	}
	fmt.Fprintf(w, "other processes during timed samples: %s\n", strings.Join(parts, "; "))
	if skewed > 0 {
		fmt.Fprintf(w, "WARNING: %d kept samples ran while other processes used the CPU: timings are skewed\n", skewed)
	}
}

func repsString(reps map[string]int, names []string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, reps[n]))
	}
	return strings.Join(parts, ", ")
}
