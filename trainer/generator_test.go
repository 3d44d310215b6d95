package trainer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/core"
)

// TIS weights and mismatch metrics of a two-sequence batch, worked by hand:
// old - rollout = 0.5, -1.0, (unknown), 3.0, so |diff| averages
// (0.5 + 1 + 3) / 3 = 1.5 over the three known tokens, and the raw weights
// are e^0.5 = 1.6487212707001282, e^-1 = 0.36787944117144233, 1, e^3.
func TestTISWeightsByHand(t *testing.T) {
	batch := func() *core.Rollout {
		return &core.Rollout{Seqs: []core.Sequence{
			{Response: []int32{5, 6, 2}, LogProbs: []float64{-1, -2, -0.5}, RolloutLogProbs: []float64{-1.5, -1, math.NaN()}},
			{Response: []int32{7}, LogProbs: []float64{-0.1}, RolloutLogProbs: []float64{-3.1}},
		}}
	}
	const e05, em1 = 1.6487212707001282, 0.36787944117144233
	for _, tc := range []struct {
		name     string
		cap      float64
		want     [][]float64
		mean     float64
		clipfrac float64
	}{
		{"off", 0, nil, 0, 0},
		// cap 2: only e^3 is cut.
		{"cap 2", 2, [][]float64{{e05, em1, 1}, {2}}, (e05 + em1 + 1 + 2) / 4, 0.25},
		// cap 1.5: e^0.5 and e^3 are cut.
		{"cap 1.5", 1.5, [][]float64{{1.5, em1, 1}, {1.5}}, (1.5 + em1 + 1 + 1.5) / 4, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]float64{}
			w, err := core.TISWeights(batch(), tc.cap, m)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(m["rollout/logprob_abs_diff"]-1.5) > 1e-12 {
				t.Errorf("logprob_abs_diff %v, want 1.5", m["rollout/logprob_abs_diff"])
			}
			if tc.want == nil {
				if w != nil || len(m) != 1 {
					t.Errorf("cap off: weights %v, metrics %v; want none and only logprob_abs_diff", w, m)
				}
				return
			}
			for i := range tc.want {
				for j := range tc.want[i] {
					if math.Abs(w[i][j]-tc.want[i][j]) > 1e-12 {
						t.Errorf("w[%d][%d] = %v, want %v", i, j, w[i][j], tc.want[i][j])
					}
				}
			}
			if math.Abs(m["rollout/tis_weight_mean"]-tc.mean) > 1e-12 || m["rollout/tis_clipfrac"] != tc.clipfrac {
				t.Errorf("mean %v clipfrac %v, want %v %v", m["rollout/tis_weight_mean"], m["rollout/tis_clipfrac"], tc.mean, tc.clipfrac)
			}
		})
	}
	// The weights multiply the strategies' PGWeight row by row.
	r := batch()
	r.Seqs[0].PGWeight = []float64{0.5, 2, 3}
	if err := applyTIS(r, 2, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.5 * e05, 2 * em1, 3}; math.Abs(r.Seqs[0].PGWeight[0]-want[0]) > 1e-12 || math.Abs(r.Seqs[0].PGWeight[1]-want[1]) > 1e-12 || r.Seqs[0].PGWeight[2] != 3 {
		t.Errorf("PGWeight %v, want %v", r.Seqs[0].PGWeight, want)
	}
	if !slices.Equal(r.Seqs[1].PGWeight, []float64{2}) {
		t.Errorf("PGWeight %v, want [2] (nil times the TIS weight)", r.Seqs[1].PGWeight)
	}
	// A row of the wrong length is an error.
	r = batch()
	r.Seqs[1].RolloutLogProbs = nil
	if _, err := core.TISWeights(r, 2, map[string]float64{}); err == nil || !strings.Contains(err.Error(), "sequence 1: 0 rollout log-probs for 1 tokens") {
		t.Errorf("error %v", err)
	}
}

func TestRolloutConfigErrors(t *testing.T) {
	srv := `rollout.servers=["http://127.0.0.1:8000"]`
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{`rollout.servers=["ftp://x"]`, "rollout.weight_sync.dir=/tmp/w"}, "rollout.servers[0]: want an http or https URL"},
		{[]string{`rollout.servers=["http://a:1", "localhost:8000"]`, "rollout.weight_sync.dir=/tmp/w"}, "rollout.servers[1]: want an http or https URL"},
		{[]string{`rollout.servers=["http://"]`, "rollout.weight_sync.dir=/tmp/w"}, "rollout.servers[0]: want an http or https URL with a host"},
		{[]string{`rollout.servers=[3]`}, "rollout.servers[0]: want a URL"},
		{[]string{`rollout.servers=http://a:1`}, "rollout.servers: want a list"},
		{[]string{srv}, "rollout.weight_sync.dir: required with rollout.servers"},
		{[]string{"rollout.tis_cap=0.5"}, "rollout.tis_cap: must be 0 (off) or > 1"},
		{[]string{"rollout.tis_cap=2"}, "rollout.tis_cap: needs rollout.servers"},
		{[]string{"rollout.dtype=float16"}, `rollout.dtype: want float32 or bfloat16, got "float16"`},
		{[]string{"rollout.dtype=bfloat16"}, "rollout.dtype: bfloat16 needs a Hugging Face policy (model.hf)"},
		{[]string{"rollout.dtype=bfloat16", "model.hf=m", srv, "rollout.weight_sync.dir=w"}, "rollout.dtype: applies to in-process generation"},
		{[]string{"rollout.server_timeout=abc"}, "rollout.server_timeout: want a duration"},
		{[]string{"rollout.server_timeout=-1"}, "rollout.server_timeout: must be > 0"},
		{[]string{"rollout.server_retries=-1"}, "rollout.server_retries: must be >= 0"},
		{[]string{"rollout.weight_sync.every=-1"}, "rollout.weight_sync.every: must be >= 0"},
		{[]string{"rollout.weight_sync.endpoint=reload"}, "rollout.weight_sync.endpoint: want a path starting with /"},
		{[]string{"rollout.weight_sync.bogus=1"}, "rollout.weight_sync.bogus: unknown key"},
	} {
		_, err := LoadConfig(LoadOptions{Env: []string{}, Sets: tc.sets})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.sets, err, tc.want)
		}
	}
	// Defaults, and servers with sync off need no directory.
	cfg, err := LoadConfig(LoadOptions{Env: []string{}, Sets: []string{srv, "rollout.weight_sync.every=0", "rollout.server_timeout=1.5", "rollout.tis_cap=2"}})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rollout
	if !slices.Equal(r.Servers, []string{"http://127.0.0.1:8000"}) || r.ServerTimeout != 1500*time.Millisecond || r.ServerRetries != 2 || r.TISCap != 2 ||
		r.WeightSync != (WeightSyncConfig{Every: 0, Endpoint: "/update_weights_from_disk", TokenEnv: "CDE_SERVE_TOKEN"}) {
		t.Errorf("rollout config %+v", r)
	}
	def, _ := LoadConfig(LoadOptions{Env: []string{}})
	if def.Rollout.Servers != nil || def.Rollout.ServerTimeout != 120*time.Second || def.Rollout.WeightSync.Every != 1 || def.Rollout.TISCap != 0 {
		t.Errorf("default rollout config %+v", def.Rollout)
	}
}

// poolingStrategy needs pooled states, which servers do not give.
type poolingStrategy struct{}

func (poolingStrategy) Name() string      { return "pooler" }
func (poolingStrategy) Needs() core.Needs { return core.Needs{Pooling: "last"} }

// rescoringBackend is fakeBackend with Rescorer: every token scores -0.4,
// entropy 0.7. It keeps the PGWeight rows of the last actor update.
type rescoringBackend struct {
	*fakeBackend
	pgWeights [][]float64
	sizes     []int // sequences per ScoreLogProbs call
}

func (b *rescoringBackend) ScoreLogProbs(seqs []*core.Sequence, temp float64) (lps, ents [][]float64, err error) {
	b.calls = append(b.calls, "rescore")
	b.sizes = append(b.sizes, len(seqs))
	for _, s := range seqs {
		lp, en := make([]float64, s.Len()), make([]float64, s.Len())
		for t := range lp {
			lp[t], en[t] = -0.4, 0.7
		}
		lps, ents = append(lps, lp), append(ents, en)
	}
	return lps, ents, nil
}

func (b *rescoringBackend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	b.pgWeights = nil
	for _, s := range r.Seqs {
		b.pgWeights = append(b.pgWeights, s.PGWeight)
	}
	return b.fakeBackend.UpdateActor(r, u)
}

// fakeServers answers every prompt with [EOS] ... as fakeBackend does, but
// with server log-probs -0.5 and unknown (NaN), and records syncs in the
// backend's call list.
type fakeServers struct {
	be       *fakeBackend
	live     int
	poolings []string // each request's Pooling
}

func (f *fakeServers) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	f.poolings = append(f.poolings, req.Pooling)
	gens, err := f.be.Generate(req)
	f.be.calls[len(f.be.calls)-1] = "remote-generate"
	for i := range gens {
		gens[i].LogProbs = []float64{-0.5, math.NaN()}
		gens[i].Entropies = nil
	}
	return gens, err
}
func (f *fakeServers) SyncWeights() error {
	f.be.calls = append(f.be.calls, "sync")
	f.live--
	return nil
}
func (f *fakeServers) LiveServers() int { return f.live }

// With a remote generator the trainer syncs before the first generation
// and after each update but the last, rescores with the backend (old
// log-probs -0.4), keeps the servers' log-probs, and weights the policy
// gradient by min(exp(-0.4 - -0.5), cap) = e^0.1 (under cap 2) and 1
// where the server's log-prob is unknown. Eval stays in-process.
func TestTrainerRemoteGeneration(t *testing.T) {
	cfg := fakeConfig(t, 2, 10)
	cfg.Rollout.Servers = []string{"http://x"}
	cfg.Rollout.TISCap = 2
	cfg.Rollout.WeightSync.Every = 1
	be := &rescoringBackend{fakeBackend: &fakeBackend{}}
	tr := fakeTrainer(t, cfg, be.fakeBackend)
	tr.Backend = be
	tr.Gen = &fakeServers{be: be.fakeBackend, live: 5}
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	want := []string{"generate", "sync", "remote-generate", "rescore", "actor", "sync", "remote-generate", "rescore", "actor", "generate"}
	if !slices.Equal(be.calls, want) {
		t.Errorf("calls %v, want %v (eval in-process, sync before generating and after the first update)", be.calls, want)
	}
	e01 := math.Exp(0.1)
	for i, row := range be.pgWeights {
		if len(row) != 2 || math.Abs(row[0]-e01) > 1e-12 || row[1] != 1 {
			t.Errorf("sequence %d: PGWeight %v, want [%v 1]", i, row, e01)
		}
	}
	rows := readMetrics(t, tr.RunDir)
	m := rows[0]
	for k, v := range map[string]float64{"rollout/servers_live": 3, "rollout/logprob_abs_diff": 0.1, "rollout/tis_weight_mean": (e01 + 1) / 2, "rollout/tis_clipfrac": 0} {
		if got, ok := m[k].(float64); !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("step 0: %s = %v, want %v", k, m[k], v)
		}
	}
	if _, ok := m["perf/sync_s"]; !ok {
		t.Errorf("step 0: no perf/sync_s")
	}
	if got := rows[1]["rollout/servers_live"]; got != 3.0 {
		t.Errorf("step 1: servers_live %v, want 3 (no sync after the last update)", got)
	}

	if !slices.Equal(be.sizes, []int{4, 4}) {
		t.Errorf("rescored %v sequences per call, want [4 4]", be.sizes)
	}

	tr.Strategies = []core.Strategy{poolingStrategy{}}
	err := tr.Run(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "rollout.servers and strategies[0] (pooler): the strategy needs pooled last-layer states (pooling last), which remote servers do not return and the backend (fake) cannot recompute") {
		t.Errorf("pooling strategy with servers: error %v", err)
	}
	// Rescoring goes in parts of the actor's minibatch size.
	cfg.Train.Minibatches = 2
	be = &rescoringBackend{fakeBackend: &fakeBackend{}}
	tr = fakeTrainer(t, cfg, be.fakeBackend)
	tr.Backend, tr.Gen = be, &fakeServers{be: be.fakeBackend, live: 2}
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(be.sizes, []int{2, 2, 2, 2}) {
		t.Errorf("rescored %v sequences per call, want [2 2 2 2] (2 steps of 4 in minibatches of 2)", be.sizes)
	}
	// ... or of train.micro_batch_size when that is smaller.
	cfg.Train.MicroBatchSize = 1
	be = &rescoringBackend{fakeBackend: &fakeBackend{}}
	tr = fakeTrainer(t, cfg, be.fakeBackend)
	tr.Backend, tr.Gen = be, &fakeServers{be: be.fakeBackend, live: 2}
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(be.sizes, []int{1, 1, 1, 1, 1, 1, 1, 1}) {
		t.Errorf("rescored %v sequences per call, want 8 calls of 1 (micro_batch_size 1)", be.sizes)
	}
	cfg.Train.Minibatches, cfg.Train.MicroBatchSize = 1, 0

	// A backend that pools while rescoring: the servers are asked for no
	// states, and the batch the actor sees carries the rescored ones.
	eb := &embeddingBackend{rescoringBackend: &rescoringBackend{fakeBackend: &fakeBackend{}}}
	servers := &fakeServers{be: eb.fakeBackend, live: 2}
	tr = fakeTrainer(t, cfg, eb.fakeBackend)
	tr.Backend, tr.Gen, tr.Strategies = eb, servers, []core.Strategy{poolingStrategy{}}
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(eb.poolings, []string{"last", "last"}) || !slices.Equal(servers.poolings, []string{"", ""}) {
		t.Errorf("rescored with poolings %v, servers asked for %v; want [last last] and two empty ones", eb.poolings, servers.poolings)
	}
	if eb.embeddingsSeen != 2*4 {
		t.Errorf("the actor saw %d sequences with the rescored embedding, want 8", eb.embeddingsSeen)
	}
}

// embeddingBackend pools [len(response), 1] for every sequence.
type embeddingBackend struct {
	*rescoringBackend
	poolings       []string
	embeddingsSeen int
}

func (b *embeddingBackend) RescoreWithEmbeddings(seqs []*core.Sequence, temp float64, pooling string) (lps, ents, embs [][]float64, err error) {
	b.poolings = append(b.poolings, pooling)
	lps, ents, err = b.ScoreLogProbs(seqs, temp)
	for _, s := range seqs {
		embs = append(embs, []float64{float64(s.Len()), 1})
	}
	return lps, ents, embs, err
}

func (b *embeddingBackend) UpdateActor(r *core.Rollout, u core.ActorUpdate) (map[string]float64, error) {
	for _, s := range r.Seqs {
		if slices.Equal(s.Embedding, []float64{float64(s.Len()), 1}) {
			b.embeddingsSeen++
		}
	}
	return b.rescoringBackend.UpdateActor(r, u)
}

// readMetrics reads RUN/metrics.jsonl, one map per line.
func readMetrics(t *testing.T, runDir string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		rows = append(rows, m)
	}
	return rows
}

// rollout_logprobs round-trip through a rollout file, NaN as null.
func TestRolloutFileRolloutLogProbs(t *testing.T) {
	r := &core.Rollout{Step: 1, TotalSteps: 3, Seqs: []core.Sequence{{Response: []int32{4, 2}, LogProbs: []float64{-0.4, -0.4},
		RolloutLogProbs: []float64{-0.5, math.NaN()}}}}
	data, err := core.MarshalRollout(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"rollout_logprobs":[-0.5,null]`) {
		t.Errorf("file %s: want rollout_logprobs [-0.5,null]", data)
	}
	back, err := core.ReadRollout(strings.NewReader(string(data)), "b.json")
	if err != nil {
		t.Fatal(err)
	}
	got := back.Seqs[0].RolloutLogProbs
	if len(got) != 2 || got[0] != -0.5 || !math.IsNaN(got[1]) {
		t.Errorf("read back %v, want [-0.5 NaN]", got)
	}
	bad := strings.Replace(string(data), `[-0.5,null]`, `[-0.5]`, 1)
	if _, err := core.ReadRollout(strings.NewReader(bad), "b.json"); err == nil || !strings.Contains(err.Error(), "rollout_logprobs: 1 entries for 2 tokens") {
		t.Errorf("short rollout_logprobs: error %v", err)
	}
}
