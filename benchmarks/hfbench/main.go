// Command hfbench times a Hugging Face architecture at LLM shape on cde's
// cpu engine and on PyTorch (torch_hf.py beside this file), one after the
// other in one run: a forward with per-token log-probs of B x T tokens, one
// PPO actor step (forward, backward, Adam) on the same batch, and KV-cache
// decoding at batch 1 and 32. Weights are random (the shape is what costs).
// It also measures this machine's memory read bandwidth, to say how close
// batch-1 decoding (which reads every weight once per token) comes to it.
//
//	go run ./benchmarks/hfbench                       # Qwen3-0.6B shape
//	go run ./benchmarks/hfbench --layers 4 --only go  # a quick look
//
// Peak memory is the process's VmHWM after each phase.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/backends/xla/hf"
	"github.com/cde-rl/cde/backends/xla/peft"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/engines/cpu"
	"k8s.io/klog/v2"
)

func main() {
	layers := flag.Int("layers", 28, "layers (Qwen3-0.6B: 28)")
	batch := flag.Int("batch", 8, "sequences in the forward and the train step")
	seqLen := flag.Int("seq", 256, "tokens per sequence (prompt 64 + response)")
	decodeTokens := flag.Int("decode", 32, "tokens decoded per decode measurement")
	only := flag.String("only", "", "go or torch: run one side only")
	skipTrain := flag.Bool("skip-train", false, "skip the train step (memory)")
	trainBatch := flag.Int("train-batch", 0, "sequences in the train step (default --batch)")
	micro := flag.Int("micro-batch", 0, "sequences per forward/backward pass of the train step, gradients summed (train.micro_batch_size; 0: one pass)")
	torchMicro := flag.Int("torch-micro-batch", -1, "PyTorch's --micro-batch (default: the same)")
	reps := flag.Int("reps", 3, "decode repetitions (median)")
	skipForward := flag.Bool("skip-forward", false, "skip the forward measurement")
	decodeBatches := flag.String("decode-batches", "1,32", "decode batch sizes, comma-separated")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the cpu engine's measurements to this file")
	engine := flag.String("engine", "cpu", "cde's engine: cpu, or xla:cuda / xla:cpu in a build with -tags xla")
	plugin := flag.String("pjrt-plugin", "", "the xla:* engines' PJRT plugin, a file or a directory (backend.pjrt_plugin)")
	torchDevice := flag.String("torch-device", "cpu", "PyTorch's device: cpu (2 threads) or cuda")
	python := flag.String("python", "/usr/bin/python3", "the Python that runs torch_hf.py")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	recompute := flag.Bool("recompute", false, "cde's train step recomputes each block's activations in the backward pass (model.recompute; PyTorch's side is unchanged)")
	loraRank := flag.Int("lora-rank", 0, "train LoRA adapters of this rank (alpha 2r) on all seven projections, the base frozen, on both sides (model.lora; 0: every weight)")
	baseBF16 := flag.Bool("base-bf16", false, "with --lora-rank, store the frozen base weights in bfloat16 on both sides, widened to float32 where they are read (model.lora.base_dtype: bfloat16)")
	xlaMemLog := flag.Bool("xla-memory-log", false, "log each graph the xla:* engines compile with its device memory (code, inputs, outputs, aliases, temporary: go-xla's compile log at klog verbosity 1, on stderr), to see where a run's GPU memory goes")
	flag.Parse()
	if *xlaMemLog {
		var kfs flag.FlagSet
		klog.InitFlags(&kfs)
		if err := kfs.Set("v", "1"); err != nil {
			fmt.Fprintln(os.Stderr, "--xla-memory-log:", err)
			os.Exit(2)
		}
	}
	if *spread < 0 || *spreadSlots < 0 || *spreadMax < 1 || *spreadStop < 2 {
		fmt.Fprintln(os.Stderr, "--spread, --spread-slots >= 0, --spread-max >= 1, --spread-stop >= 2")
		os.Exit(2)
	}
	if *baseBF16 && *loraRank == 0 {
		fmt.Fprintln(os.Stderr, "--base-bf16 stores a LoRA run's frozen base: set --lora-rank too")
		os.Exit(2)
	}
	var nbs []int
	for _, f := range strings.Split(*decodeBatches, ",") {
		var nb int
		if _, err := fmt.Sscan(f, &nb); err != nil || nb < 1 {
			fmt.Fprintf(os.Stderr, "--decode-batches: %q is not a positive integer\n", f)
			os.Exit(2)
		}
		nbs = append(nbs, nb)
	}
	cfg := fmt.Sprintf(`{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
		"head_dim": 128, "num_hidden_layers": %d, "num_attention_heads": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
		"max_position_embeddings": 40960, "rope_theta": 1000000.0, "tie_word_embeddings": true}`, *layers)
	hc, err := hf.ParseConfig([]byte(cfg))
	if err != nil {
		panic(err)
	}
	fmt.Printf("shape: Qwen3-0.6B-like, %d layers, d 1024, 16/8 heads x 128, ff 3072, vocab 151936; batch %d x %d tokens; train step %d sequences, micro-batch %d (0: one pass), LoRA rank %d (0: every weight trains), recompute %v; decode %d tokens\n",
		*layers, *batch, *seqLen, cmp.Or(*trainBatch, *batch), *micro, *loraRank, *recompute, *decodeTokens)
	bwScalar, bwVector := bandwidth()
	bw := max(bwScalar, bwVector)
	fmt.Printf("memory read bandwidth, 1 GiB read by 2 goroutines, best of 5: %.1f GB/s scalar (8 float64 sums), %.1f GB/s vectorised (bytes.IndexByte); using %.1f\n",
		bwScalar, bwVector, bw)
	res := map[string]map[string]float64{}
	if *only != "torch" {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				panic(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				panic(err)
			}
		}
		res["go"] = runGo(hc, *loraRank, *baseBF16, *recompute, *engine, *plugin, *batch, max(*trainBatch, 0), *micro, *seqLen, *decodeTokens, *reps, *skipForward, *skipTrain, nbs)
		pprof.StopCPUProfile()
		if os.Getenv("CDE_CPU_OPSTATS") != "" {
			cpu.WriteOpStats(os.Stderr, 25) // per-op times of every measurement above
		}
		debug.FreeOSMemory() // before PyTorch loads its copy
	}
	if *only != "go" {
		tm := *micro
		if *torchMicro >= 0 {
			tm = *torchMicro
		}
		res["torch"] = runTorch(*python, *torchDevice, cfg, *loraRank, *baseBF16, *batch, *trainBatch, tm, *seqLen, *decodeTokens, *skipTrain, nbs)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			panic(err)
		}
	}
	if g, t := res["go"], res["torch"]; g != nil && t != nil {
		keys := []string{"forward_s", "train_s"}
		for _, nb := range nbs {
			keys = append(keys, fmt.Sprintf("decode%d_s", nb))
		}
		for _, k := range keys {
			if g[k] > 0 && t[k] > 0 {
				fmt.Printf("%-11s %s %8.3f s  torch(%s) %8.3f s  ratio %.2f\n", k, *engine, g[k], *torchDevice, t[k], g[k]/t[k])
			}
		}
	}
	if *engine != "cpu" {
		return // the read-rate comparison below is about the cpu engine
	}
	if t := res["torch"]; t != nil && t["bandwidth_gbs"] > bw {
		bw = t["bandwidth_gbs"]
		fmt.Printf("memory read bandwidth as PyTorch's vectorised sum of 1 GiB sees it: %.1f GB/s (used below)\n", bw)
	}
	if g := res["go"]; g != nil && g["decode1_s"] > 0 {
		weights := g["weight_bytes"]
		tps := float64(*decodeTokens) / g["decode1_s"]
		fmt.Printf("cpu decode at batch 1: %.2f tokens/s, reading %.2f GB of weights per token = %.1f GB/s (%.0f%% of the measured %.1f GB/s)\n",
			tps, weights/1e9, tps*weights/1e9, 100*tps*weights/1e9/bw, bw)
		fmt.Printf("  against the read rate measured just before each repetition (median %.1f GB/s): median share %.0f%%\n",
			g["decode1_adjacent_gbs"], 100*g["decode1_adjacent_share"])
	}
}

// bandwidth measures this machine's memory read bandwidth on a 1 GiB
// array, 2 goroutines each reading half, best of 5, two ways: a scalar
// loop with 8 independent float64 sums, and bytes.IndexByte looking for a
// byte that is not there (the Go runtime's vectorised scan, which reads
// at the rate the memory delivers). It returns both in GB/s; the larger is
// the machine's figure.
func bandwidth() (scalar, vector float64) {
	n := 1 << 27
	a := make([]float64, n)
	for i := range a {
		a[i] = float64(i & 7) // no byte of these values is 0xAB
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 8*n)
	sums := make([]float64, 2)
	scalar = bestRate(8*n, 5, func(w int) {
		var s [8]float64 // independent sums, so the loads, not the adds, bound it
		part := a[w*n/2 : (w+1)*n/2]
		for i := 0; i+8 <= len(part); i += 8 {
			s[0] += part[i]
			s[1] += part[i+1]
			s[2] += part[i+2]
			s[3] += part[i+3]
			s[4] += part[i+4]
			s[5] += part[i+5]
			s[6] += part[i+6]
			s[7] += part[i+7]
		}
		sums[w] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
	})
	vector = readRate(raw, 5)
	return scalar, vector
}

// readRate is the best of tries vectorised reads of raw (bytes.IndexByte
// for 0xAB, which raw must not hold) by 2 goroutines, each half, in GB/s.
func readRate(raw []byte, tries int) float64 {
	return bestRate(len(raw), tries, func(w int) {
		if bytes.IndexByte(raw[w*len(raw)/2:(w+1)*len(raw)/2], 0xAB) >= 0 {
			panic("bandwidth: unexpected byte")
		}
	})
}

// bestRate runs read(0) and read(1) on 2 goroutines at once, tries times,
// and returns the best rate at which they covered n bytes, in GB/s.
func bestRate(n, tries int, read func(w int)) float64 {
	b := 0.0
	for range tries {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				read(w)
			}()
		}
		wg.Wait()
		b = max(b, float64(n)/time.Since(start).Seconds()/1e9)
	}
	return b
}

// median of xs (the upper middle for an even count); xs is sorted.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// currentRSS is the process's VmRSS in GiB.
func currentRSS() float64 { return procStatusGiB("VmRSS:") }

// counters are the process's heap allocations so far and its minor page
// faults.
type counters struct{ mallocs, minflt uint64 }

func readCounters() counters {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return counters{m.Mallocs, uint64(ru.Minflt)}
}

// peakRSS is the process's VmHWM in GiB: its peak resident memory since
// start or since the last reset through /proc/self/clear_refs.
func peakRSS() float64 { return procStatusGiB("VmHWM:") }

func procStatusGiB(field string) float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, field)), "%f", &kb)
			return kb / 1024 / 1024
		}
	}
	return 0
}

func runGo(hc *hf.Config, loraRank int, baseBF16, recompute bool, engine, plugin string, batch, trainBatch, micro, seqLen, decode, reps int, skipForward, skipTrain bool, decodeBatches []int) map[string]float64 {
	out := map[string]float64{}
	pc := xla.HFModelConfig(hc, max(seqLen+decode+64, 16+*spreadMax+4))
	pc.LoRA = xla.LoRAOf(loraRank, 2*float64(loraRank), 0, peft.Modules)
	pc.Recompute = recompute
	pc.BaseBF16 = baseBF16
	if *genDType != "float32" && *genDType != "bfloat16" {
		panic(fmt.Sprintf("--gen-dtype %q: want float32 or bfloat16", *genDType))
	}
	b, err := xla.New(xla.Options{Engine: engine, PJRTPlugin: plugin, Policy: pc, Seed: 1, ActorLR: 1e-6, PAD: 0, EOS: 151645,
		GenBF16: *genDType == "bfloat16"})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	params := 0.0
	for _, shape := range xla.HFParamShapes(hc) {
		n := 1.0
		for _, d := range shape {
			n *= float64(d)
		}
		params += n
	}
	out["params"] = params
	out["weight_bytes"] = 4 * params
	if baseBF16 {
		out["weight_bytes"] = 2 * params // the frozen weights, read by decode, are bfloat16 (the adapters are a rounding error)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	r := &core.Rollout{}
	prompt := 64
	for i := range batch {
		p := make([]int32, prompt)
		resp := make([]int32, seqLen-prompt)
		for j := range p {
			p[j] = int32(rng.IntN(150000))
		}
		for j := range resp {
			resp[j] = int32(rng.IntN(150000))
		}
		lp := make([]float64, len(resp))
		adv := make([]float64, len(resp))
		for j := range lp {
			lp[j], adv[j] = -12, float64(i%2*2-1)
		}
		r.Seqs = append(r.Seqs, core.Sequence{Group: i / 2, Prompt: p, Response: resp, LogProbs: lp, Advantages: adv, Returns: adv})
	}
	seqs := make([]*core.Sequence, len(r.Seqs))
	for i := range r.Seqs {
		seqs[i] = &r.Seqs[i]
	}
	timeIt := func(name string, reps int, f func()) {
		// The phase's own peak: return freed memory to the OS, then reset
		// the kernel's high-water mark (VmHWM) to the current RSS.
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		before := currentRSS()
		f() // compile and warm up
		firstPeak := peakRSS()
		debug.FreeOSMemory()
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		start := time.Now()
		for range reps {
			f()
		}
		phase := strings.TrimSuffix(name, "_s")
		out[name] = time.Since(start).Seconds() / float64(reps)
		out["peak_gib_"+phase] = peakRSS()
		out["peak_gib_first_"+phase] = firstPeak
		out["rss_gib_before_"+phase] = before
		fmt.Fprintf(os.Stderr, "go %s: %.2f s (RSS %.1f GiB before; peak %.1f GiB in the first call, which compiles and creates state, %.1f GiB in the timed ones)\n",
			name, out[name], before, firstPeak, peakRSS())
	}
	if !skipForward {
		timeIt("forward_s", 1, func() {
			if _, _, err := b.ScoreLogProbs(seqs, 1); err != nil {
				panic(err)
			}
		})
	}
	if !skipTrain {
		tr := r
		if trainBatch > 0 && trainBatch < len(r.Seqs) {
			tr = &core.Rollout{Seqs: r.Seqs[:trainBatch]}
		}
		timeIt("train_s", 1, func() {
			if _, err := b.UpdateActor(tr, core.ActorUpdate{Epochs: 1, Minibatches: 1, ClipLow: 0.2, ClipHigh: 0.2, Temperature: 1, MicroBatchSize: micro}); err != nil {
				panic(err)
			}
		})
	}
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	probe := bytes.Repeat([]byte{1}, 1<<30) // for readRate, every page touched
	for _, nb := range decodeBatches {
		prompts := make([][]int32, nb)
		for i := range prompts {
			prompts[i] = make([]int32, 16)
			for j := range prompts[i] {
				prompts[i][j] = int32(rng.IntN(150000))
			}
		}
		// Decode time per token: (time for decode tokens - time for 1, the
		// prefill and first token) / (tokens generated - 1), median of 3.
		gen := func(n int) (float64, int) {
			start := time.Now()
			g, err := b.Generate(core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: n, Seed: 3})
			if err != nil {
				panic(err)
			}
			return time.Since(start).Seconds(), len(g[0].Tokens)
		}
		// Warm-up: both timed lengths once, so that neither timed run
		// compiles a graph (an engine may compile per response length: the
		// xla engines' device loop keys its graphs by it, and every engine
		// its caches by prompt + response length).
		gen(1)
		gen(decode)
		var per, rates, shares, mallocs, faults []float64
		for range reps {
			if nb == 1 {
				// The read rate just before each repetition: this machine's
				// rate drifts (39-73 GB/s within a day), so the share of it
				// that decode reaches is also taken against a neighbour.
				rates = append(rates, readRate(probe, 3))
			}
			// On a loaded machine a stall during the one-token run can make
			// it outlast the long one, and the difference negative: such a
			// repetition is drawn again (up to 5 times), since a negative
			// time per token measures nothing.
			var c0, c1, c2 counters
			var one, all float64
			var got int
			for try := 0; try < 5; try++ {
				c0 = readCounters()
				one, _ = gen(1)
				c1 = readCounters()
				all, got = gen(decode)
				c2 = readCounters()
				if all > one {
					break
				}
				fmt.Fprintf(os.Stderr, "go decode batch %d: %d tokens took %.3f s, one token %.3f s: drawn again\n", nb, decode, all, one)
			}
			if got < 2 {
				panic("decode stopped at EOS")
			}
			if all <= one {
				panic(fmt.Sprintf("decode batch %d: %d tokens never took longer than one in 5 tries (%.3f s against %.3f s): the machine is too loaded to time decoding", nb, decode, all, one))
			}
			per = append(per, (all-one)/float64(got-1))
			// Heap allocations and minor page faults per token, by the same
			// difference: what a token costs beyond the time, and steadier
			// than it on a noisy machine.
			perTok := func(a, b, c uint64) float64 { return (float64(c-b) - float64(b-a)) / float64(got-1) }
			mallocs = append(mallocs, perTok(c0.mallocs, c1.mallocs, c2.mallocs))
			faults = append(faults, perTok(c0.minflt, c1.minflt, c2.minflt))
			if nb == 1 {
				shares = append(shares, out["weight_bytes"]/per[len(per)-1]/1e9/rates[len(rates)-1])
			}
		}
		fmt.Fprintf(os.Stderr, "go decode batch %d: %.3f s per token (%v)\n", nb, median(per), per)
		fmt.Fprintf(os.Stderr, "go decode batch %d: per token %.0f heap allocations, %.0f minor page faults (medians of %v and %v)\n", nb, median(mallocs), median(faults), mallocs, faults)
		out[fmt.Sprintf("decode%d_s", nb)] = median(per) * float64(decode)
		out[fmt.Sprintf("decode%d_mallocs_per_token", nb)] = median(mallocs)
		out[fmt.Sprintf("decode%d_minflt_per_token", nb)] = median(faults)
		if nb == 1 {
			out["decode1_adjacent_gbs"], out["decode1_adjacent_share"] = median(rates), median(shares)
			fmt.Fprintf(os.Stderr, "go decode batch 1: read rate before each repetition %.1f GB/s, share reached %.2f\n", rates, shares)
		}
	}
	out["peak_gib_decode"] = peakRSS()
	runtime.GC()
	if *spread > 0 {
		spreadRun(b, out)
	}
	return out
}

func runTorch(python, device, cfg string, loraRank int, baseBF16 bool, batch, trainBatch, micro, seqLen, decode int, skipTrain bool, decodeBatches []int) map[string]float64 {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "torch_hf.py")
	if _, err := os.Stat(script); err != nil {
		// A binary built elsewhere (the GPU check carries one): the script
		// from the repository root it runs in.
		script = filepath.Join("benchmarks", "hfbench", "torch_hf.py")
	}
	dir, _ := os.MkdirTemp("", "hfbench")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644)
	args := []string{script, dir, fmt.Sprint(batch), fmt.Sprint(seqLen), fmt.Sprint(decode), fmt.Sprint(trainBatch), fmt.Sprint(micro)}
	if skipTrain {
		args = append(args, "--skip-train")
	}
	var nbs []string
	for _, nb := range decodeBatches {
		nbs = append(nbs, fmt.Sprint(nb))
	}
	args = append(args, "--device="+device, "--decode-batches="+strings.Join(nbs, ","), fmt.Sprintf("--lora=%d", loraRank))
	if baseBF16 {
		args = append(args, "--base-bf16")
	}
	cmd := exec.Command(python, args...)
	cmd.Stderr = os.Stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	var out map[string]float64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &out); err != nil {
			fmt.Fprintln(os.Stderr, sc.Text())
		}
	}
	if err := cmd.Wait(); err != nil {
		panic(err)
	}
	return out
}

// The spread measurement's flags (package level: runGo reads them).
var (
	spread      = flag.Int("spread", 0, "responses of one generation whose lengths spread (0: skip): 1 in --spread-stop vocabulary ids ends a response, so a random model's lengths come out roughly geometric, capped at --spread-max; timed with every response at once and with --spread-slots slots")
	spreadSlots = flag.Int("spread-slots", 32, "slots of the spread measurement's second run (GenerateRequest.Slots, rollout.max_rows): a response that stops frees its slot on the xla engines' device loop")
	spreadMax   = flag.Int("spread-max", 512, "the spread measurement's max tokens per response")
	spreadStop  = flag.Int("spread-stop", 128, "1 in this many vocabulary ids stops a response in the spread measurement")
	genDType    = flag.String("gen-dtype", "float32", "cde's generation arithmetic (rollout.dtype): float32, or bfloat16 (bfloat16 copies of the weight matrices, float32 sums)")
)

// spreadRun times one generation of *spread responses of spread lengths
// with every response at once and with *spreadSlots slots (each after an
// untimed run of the same request, which compiles): the same responses
// either way, so the tokens per second compare the schedules alone.
func spreadRun(b *xla.Backend, out map[string]float64) {
	rng := rand.New(rand.NewPCG(3, 4))
	prompts := make([][]int32, *spread)
	for i := range prompts {
		prompts[i] = make([]int32, 16)
		for j := range prompts[i] {
			prompts[i][j] = int32(rng.IntN(150000))
		}
	}
	var stops []int32
	for v := int32(*spreadStop); v < 151936; v += int32(*spreadStop) {
		stops = append(stops, v)
	}
	var lens []int
	for _, slots := range []int{0, *spreadSlots} {
		req := core.GenerateRequest{Prompts: prompts, Temperature: 1, MaxTokens: *spreadMax, Seed: 5, StopTokens: stops, Slots: slots}
		if _, err := b.Generate(req); err != nil {
			panic(err)
		}
		start := time.Now()
		gens, err := b.Generate(req)
		if err != nil {
			panic(err)
		}
		sec := time.Since(start).Seconds()
		tokens := 0
		lens = lens[:0]
		for _, g := range gens {
			tokens += len(g.Tokens)
			lens = append(lens, len(g.Tokens))
		}
		key := fmt.Sprintf("spread_slots%d", slots)
		out[key+"_s"] = sec
		out[key+"_tokens_per_s"] = float64(tokens) / sec
		out["spread_tokens"] = float64(tokens)
		fmt.Fprintf(os.Stderr, "go spread: %d responses, %d slots (0: all at once): %d tokens in %.3f s, %.1f tokens/s\n", len(gens), slots, tokens, sec, float64(tokens)/sec)
	}
	slices.Sort(lens)
	out["spread_len_min"], out["spread_len_median"], out["spread_len_max"] = float64(lens[0]), float64(lens[len(lens)/2]), float64(lens[len(lens)-1])
}
