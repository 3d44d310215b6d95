package session_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/assets"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// The base key names what a base is, not where it is kept: pretrain.dir
// leaves it alone; the pretrain seed, else the run seed, changes it.
func TestBaseKey(t *testing.T) {
	key := func(sets ...string) string { return session.BaseKey(shapeCfg(t, sets...)) }
	base := key("seed=1")
	if len(base) != 12 {
		t.Errorf("key %q, want 12 hex digits", base)
	}
	for _, c := range []struct {
		sets []string
		same bool
	}{
		{[]string{"seed=1", "pretrain.dir=elsewhere"}, true},
		{[]string{"seed=2"}, false}, // pretrain.seed 0: the run seed
		{[]string{"seed=1", "pretrain.seed=3"}, false},
		{[]string{"seed=1", "pretrain.lr=0.002"}, false},
		{[]string{"seed=1", "model.d_model=32"}, false},
	} {
		if got := key(c.sets...); (got == base) != c.same {
			t.Errorf("%v: key %s against %s, want same %v", c.sets, got, base, c.same)
		}
	} // A fixed pretrain.seed shares one base across run seeds.
	if a, b := key("seed=1", "pretrain.seed=7"), key("seed=5", "pretrain.seed=7"); a != b {
		t.Errorf("pretrain.seed 7 under run seeds 1 and 5: keys %s and %s", a, b)
	}
	// The seed counts once: pretrain.seed 3 is the base of a run of seed 3.
	if a, b := key("seed=1", "pretrain.seed=3"), key("seed=3"); a != b {
		t.Errorf("pretrain.seed 3 and run seed 3: keys %s and %s", a, b)
	}
}

// train's defaults find the shipped base, and so does any run seed with
// pretrain.seed 1 (a bench's seeds sharing it: bench/quick.yaml).
func TestShippedBaseKey(t *testing.T) {
	for _, sets := range [][]string{nil, {"seed=3", "pretrain.seed=1"}} {
		cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: sets})
		if err != nil {
			t.Fatal(err)
		}
		if k := session.BaseKey(cfg); k != "da4cd3abefb8" || !assets.HasBase(k) {
			t.Errorf("%v: key %s, want the shipped da4cd3abefb8", sets, k)
		}
	}
}

// ResolveBase: none, a Hugging Face model's own weights, a directory as
// given (which must hold a policy), and auto, which makes the base once in
// pretrain.dir/<key> (from the shipped copy or a short warm start) and
// finds it there the next time.
func TestResolveBase(t *testing.T) {
	ctx, log, out := context.Background(), zerolog.Nop(), session.Output{W: io.Discard}
	if dir, err := session.ResolveBase(ctx, shapeCfg(t), log, out); dir != "" || err != nil {
		t.Errorf(`model.checkpoint "": %q %v`, dir, err)
	}
	if dir, err := session.ResolveBase(ctx, shapeCfg(t, "model.checkpoint=auto", "model.hf=some/dir"), log, out); dir != "" || err != nil {
		t.Errorf("auto with model.hf: %q %v", dir, err)
	}
	missing := filepath.Join(t.TempDir(), "nothing")
	if _, err := session.ResolveBase(ctx, shapeCfg(t, "model.checkpoint="+missing), log, out); err == nil || !strings.Contains(err.Error(), "config: model.checkpoint:") {
		t.Errorf("missing directory: %v", err)
	}
	pre := t.TempDir()
	cfg := shapeCfg(t, "model.checkpoint=auto", "pretrain.dir="+pre, "pretrain.steps=2", "pretrain.eval_every=1", "pretrain.eval_max_problems=4", "pretrain.batch_size=8")
	dir, err := session.ResolveBase(ctx, cfg, log, out)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(pre, session.BaseKey(cfg)); dir != want {
		t.Errorf("base in %s, want %s", dir, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "policy.gob")); err != nil {
		t.Fatal(err)
	}
	if err := trainer.VerifyIfManifest(dir); err != nil {
		t.Errorf("made base: %v", err)
	}
	again, err := session.ResolveBase(ctx, cfg, log, out)
	if err != nil || again != dir {
		t.Errorf("second call: %q %v", again, err)
	}
	// A directory given by path resolves to itself.
	if got, err := session.ResolveBase(ctx, shapeCfg(t, "model.checkpoint="+dir), log, out); got != dir || err != nil {
		t.Errorf("by path: %q %v", got, err)
	}
}

// EstimateConfig sizes a run without starting it; a critic algorithm adds
// the critic's state.
func TestEstimateConfig(t *testing.T) {
	grpo, err := session.EstimateConfig(shapeCfg(t, "algorithm.name=grpo"))
	if err != nil {
		t.Fatal(err)
	}
	ppo, err := session.EstimateConfig(shapeCfg(t, "algorithm.name=ppo"))
	if err != nil {
		t.Fatal(err)
	}
	if !(grpo.Total() > 0) || !(ppo.Total() > grpo.Total()) {
		t.Errorf("grpo %v, ppo %v: want 0 < grpo < ppo", grpo, ppo)
	}
	if _, err := session.EstimateConfig(shapeCfg(t, "model.hf="+filepath.Join(t.TempDir(), "none"))); err == nil || !strings.Contains(err.Error(), "config: model.hf") {
		t.Errorf("missing model.hf: %v", err)
	}
}

// BuildStrategies names the entry and key of what is wrong, before any
// process starts: a plugin entry's keys, a missing name, an unknown one.
func TestBuildStrategiesErrors(t *testing.T) {
	algo, err := session.BuildAlgorithm(shapeCfg(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set, want string
	}{
		{"strategies=[{name: entropy}, {plugin: ''}]", "strategies[1].plugin: want the path of a plugin executable"},
		{"strategies=[{plugin: ./p, colour: red}]", "strategies[0].colour: unknown key"},
		{"strategies=[{plugin: ./p, start_timeout: soon}]", "strategies[0].start_timeout"},
		{"strategies=[{plugin: " + filepath.Join(t.TempDir(), "absent") + "}]", "absent"},
		{"strategies=[{kappa: 3}]", "strategies[0].name: required (known: "},
		{"strategies=[{name: curiosity}]", "curiosity"},
		{"strategies=[{name: entropy, weight: {schedule: wobbly}}]", `strategies[0].weight.schedule: unknown value "wobbly"`},
		{"strategies=[{name: entropy, weight: 2}]", "strategies[0].weight: want a mapping"},
		{"strategies=[{name: forking_tokens, weight: {w0: 2}}]", "strategies[0].weight: forking_tokens takes no weight"},
	} {
		cfg := shapeCfg(t, c.set)
		if s, _, err := session.BuildStrategies(cfg, algo, zerolog.Nop()); err == nil || s != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (%d strategies), want %q", c.set, err, len(s), c.want)
		}
	}
}

// BuildStrategies hands each entry's weight to the trainer, not to the
// strategy: a linear schedule 3 -> 1 is 2 at step 5 of 10, and an entry
// without weight: has none (nil).
func TestBuildStrategiesWeights(t *testing.T) {
	cfg := shapeCfg(t, "strategies=[{name: entropy, coef: 0.01, weight: {schedule: linear, w0: 3, w_end: 1}}, {name: entropy}]")
	algo, err := session.BuildAlgorithm(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, w, err := session.BuildStrategies(cfg, algo, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || len(w) != 2 || w[0] == nil || w[1] != nil {
		t.Fatalf("strategies %d, weights %v", len(s), w)
	}
	if got := w[0].Weight(5, 10); got != 2 {
		t.Errorf("w_t at step 5 of 10 = %v, want 2", got)
	}
}
