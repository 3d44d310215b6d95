// Package bench runs a matrix of named arms (overlays of algorithm and
// strategies on one base config) x seeds head to head and writes a
// paper-style report: tables of held-out accuracy as mean ± std over seeds,
// plots, the critic head spread by prompt set, and a verdict per claim.
// docs/bench.md describes the bench file, the run directories and the
// report; `cde-run bench` is a thin layer of flags over this package:
//
//	spec, err := bench.Load("bench/smoke.yaml")
//	err = bench.Run(ctx, spec, bench.Options{Dir: "out", Exe: "/path/to/cde-run"})
package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/internal/readcap"
	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// Spec is a parsed bench file (docs/bench.md).
type Spec struct {
	File        string // the bench file as given
	Stem        string // its name without directory and extension
	Description string
	Base        []byte // the base config as a YAML document
	Seeds       []uint64
	Arms        []Arm
	Claims      []Claim
	// BaseEval (base_eval) evaluates the shared base policy once per seed
	// as the pseudo-arm "base" (BaseArm); arms then usually set
	// eval.at_start: false.
	BaseEval bool
	// Executor is where the arm-seeds train (executor:; local by default).
	Executor Executor
}

// Arm is one named overlay on the base config.
type Arm struct {
	Name    string
	Overlay []byte // YAML document (empty for none)
}

// Claim says arm Better beats arm Than on the final value of Metric (or,
// with Window > 1, the mean of its last Window values: for noisy training
// metrics).
type Claim struct {
	Name          string
	Better, Than  string
	Metric        string
	LowerIsBetter bool
	Window        int
	// PaperEffect (paper_effect), when set, is the effect the claim's
	// source reports, in the metric's units and the claim's direction: the
	// power table says whether the bench could detect it.
	PaperEffect *float64
	// Margin (margin), when > 0, is the equivalence margin, in the
	// metric's units: the verdict is "equivalent" when the claim is
	// neither held nor not held and its interval lies inside (-Margin,
	// Margin) (two one-sided tests at the interval's level per side).
	Margin float64
	// Family (family) groups claims for the multiplicity correction
	// (Holm's, over the family's two-sided p values); "" is the
	// default family, one per metric.
	Family string
	// At (at) judges the claim at equal compute instead of equal steps:
	// AtResponses, AtTokens or AtWall ("": equal steps, the final values).
	// AtValue (at_value) is the point on that axis; nil: per seed, the
	// most both arms reached (compute.go).
	At      string
	AtValue *float64
}

// family is the claim's multiplicity family: Family, or its metric.
func (c Claim) family() string {
	if c.Family != "" {
		return c.Family
	}
	return c.Metric
}

var armNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Load reads and strictly validates a bench file (ParseSpec). A path
// that does not exist and names a shipped preset ("smoke", "smoke.yaml",
// "bench/smoke.yaml") is that preset, embedded in the binary.
func Load(path string) (*Spec, error) {
	data, err := readcap.Bench.ReadFile(path)
	if errors.Is(err, readcap.ErrTooLarge) {
		return nil, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		if b, name, ok := preset(path); ok {
			return ParseSpec(b, name)
		}
	}
	if err != nil {
		return nil, notFound(path, err)
	}
	return ParseSpec(data, path)
}

// specErr prefixes a key error of core.Params ("config: KEY: why") with
// the bench file instead: "bench FILE: KEY: why".
func specErr(name string, err error) error {
	return fmt.Errorf("bench %s: %s", name, strings.TrimPrefix(err.Error(), "config: "))
}

// finishKnown marks keys as known and reports an unknown key of p first,
// before any value is read (a misspelt key is the likeliest mistake).
func finishKnown(p *core.Params, keys ...string) error {
	for _, k := range keys {
		p.Has(k)
	}
	return p.Finish()
}

// ParseSpec parses a bench file's contents. name is the file's path: it
// prefixes every error (with the key path, e.g. `arms[2].name`), names the
// results, and a `base:` file path is relative to its directory. It does
// not check the arms' configs (Validate does).
func ParseSpec(data []byte, name string) (*Spec, error) {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("bench %s: %w", name, err)
	}
	if top == nil {
		return nil, fmt.Errorf("bench %s: empty file", name)
	}
	p := core.NewParams("", top)
	if err := finishKnown(p, "description", "base", "seeds", "arms", "claims", "base_eval", "executor"); err != nil {
		return nil, specErr(name, err)
	}
	spec := &Spec{File: name, Stem: strings.TrimSuffix(filepath.Base(name), filepath.Ext(name)),
		Description: p.String("description", ""), BaseEval: p.Bool("base_eval", false)}
	ex, err := parseExecutor(top["executor"])
	if err != nil {
		return nil, specErr(name, err)
	}
	spec.Executor = ex

	switch b := top["base"].(type) {
	case nil:
		p.Fail("base", "required: a config mapping or the path of a config file")
	case string:
		file := b
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(name), file)
		}
		d, err := readcap.Config.ReadFile(file)
		p.Check(err == nil, "base", "%v", err)
		spec.Base = d
	case map[string]any:
		d, err := yaml.Marshal(b)
		p.Check(err == nil, "base", "%v", err)
		spec.Base = d
	default:
		p.Fail("base", "want a config mapping or a file path, got %s", core.DescribeValue(b))
	}

	seeds, ok := top["seeds"].([]any)
	p.Check(ok && len(seeds) > 0, "seeds", "required: a non-empty list of seeds, got %v", top["seeds"])
	seen := map[float64]bool{}
	for i, s := range seeds {
		key := fmt.Sprintf("seeds[%d]", i)
		n, ok := core.ToFloat(s)
		if !ok || n < 0 || n != math.Trunc(n) || n > 1<<53 {
			p.Fail(key, "want an integer >= 0, got %v", s)
			break
		}
		p.Check(!seen[n], key, "seed %d listed twice", uint64(n))
		seen[n] = true
		spec.Seeds = append(spec.Seeds, uint64(n))
	}
	if err := p.Err(); err != nil {
		return nil, specErr(name, err)
	}

	arms, ok := top["arms"].([]any)
	if !ok || len(arms) == 0 {
		p.Fail("arms", "required: a non-empty list of {name, config}")
	}
	names := map[string]bool{}
	for i, a := range arms {
		arm, err := parseArm(a, fmt.Sprintf("arms[%d]", i), names)
		if err != nil {
			return nil, specErr(name, err)
		}
		spec.Arms = append(spec.Arms, arm)
	}
	if spec.BaseEval {
		// "base" names the base policy's evaluation: claims may compare
		// an arm with it, and no arm may take the name.
		p.Check(!names[BaseArm], "base_eval", "an arm is named %q, the name of the base policy's evaluation", BaseArm)
		names[BaseArm] = true
	}
	if err := p.Err(); err != nil {
		return nil, specErr(name, err)
	}

	if v, ok := top["claims"]; ok && v != nil {
		claims, ok := v.([]any)
		p.Check(ok, "claims", "want a list of {name, better, than, metric, lower_is_better, window}")
		for i, c := range claims {
			cl, err := parseClaim(c, fmt.Sprintf("claims[%d]", i), names)
			if err != nil {
				return nil, specErr(name, err)
			}
			spec.Claims = append(spec.Claims, cl)
		}
	}
	if err := p.Err(); err != nil {
		return nil, specErr(name, err)
	}
	return spec, nil
}

// parseArm reads arms[i] ({name, config}); names collects the arm names.
func parseArm(v any, key string, names map[string]bool) (Arm, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Arm{}, fmt.Errorf("config: %s: want a mapping {name, config}, got %v", key, v)
	}
	p := core.NewParams(key, m)
	if err := finishKnown(p, "name", "config"); err != nil {
		return Arm{}, err
	}
	arm := Arm{Name: p.String("name", "")}
	if p.Err() == nil {
		p.Check(armNameRE.MatchString(arm.Name), "name", "want a name of letters, digits, '_', '.', '-', got %v", m["name"])
		p.Check(!names[arm.Name], "name", "arm %q listed twice", arm.Name)
	}
	names[arm.Name] = true
	if c := p.Map("config"); c != nil {
		d, err := yaml.Marshal(c)
		p.Check(err == nil, "config", "%v", err)
		arm.Overlay = d
	}
	return arm, p.Finish()
}

// parseClaim reads claims[i]; names are the arms.
func parseClaim(v any, key string, names map[string]bool) (Claim, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Claim{}, fmt.Errorf("config: %s: want a mapping, got %v", key, v)
	}
	p := core.NewParams(key, m)
	if err := finishKnown(p, "name", "better", "than", "metric", "lower_is_better", "window", "paper_effect", "margin", "family", "at", "at_value"); err != nil {
		return Claim{}, err
	}
	var cl Claim
	for _, f := range []struct {
		k   string
		dst *string
	}{{"name", &cl.Name}, {"better", &cl.Better}, {"than", &cl.Than}, {"metric", &cl.Metric}} {
		*f.dst = p.String(f.k, "")
		p.Check(p.Err() != nil || *f.dst != "", f.k, "required string, got %v", m[f.k])
	}
	if p.Err() == nil {
		p.Check(names[cl.Better], "better", "no arm named %q", cl.Better)
		p.Check(names[cl.Than], "than", "no arm named %q", cl.Than)
		p.Check(cl.Better != cl.Than, "than", "compares arm %q with itself", cl.Than)
	}
	cl.LowerIsBetter = p.Bool("lower_is_better", false)
	cl.Window = p.Int("window", 1)
	p.Check(cl.Window >= 1, "window", "must be >= 1, got %d", cl.Window)
	if p.Has("paper_effect") {
		e := p.Float("paper_effect", 0)
		p.Check(e != 0 && !math.IsInf(e, 0) && !math.IsNaN(e), "paper_effect", "want a finite effect other than 0, got %v", e)
		cl.PaperEffect = &e
	}
	if p.Has("margin") {
		cl.Margin = p.Float("margin", 0)
		p.Check(cl.Margin > 0 && !math.IsInf(cl.Margin, 0), "margin", "want a finite margin > 0, in the metric's units, got %v", cl.Margin)
	}
	cl.Family = p.String("family", "")
	parseClaimAt(p, &cl)
	return cl, p.Finish()
}

// armLayers are the config layers of one arm-seed: pretrain.dir under the
// bench directory (unless the base or the arm sets it) < base < arm < seed.
func (s *Spec) armLayers(dir string, arm Arm, seed uint64) [][]byte {
	pd, _ := yaml.Marshal(map[string]any{"pretrain": map[string]any{"dir": filepath.Join(dir, "base")}})
	layers := [][]byte{pd, s.Base}
	if len(arm.Overlay) > 0 {
		layers = append(layers, arm.Overlay)
	}
	return append(layers, []byte(fmt.Sprintf("seed: %d\n", seed)))
}

// ArmConfig is the resolved config of one arm-seed of a bench in dir
// (layers: docs/bench.md), with extra layers on top.
func (s *Spec) ArmConfig(dir string, arm Arm, seed uint64, extra ...[]byte) (*trainer.Config, error) {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Layers: append(s.armLayers(dir, arm, seed), extra...)})
	if err != nil {
		return nil, fmt.Errorf("bench %s: arm %s: %w", s.File, arm.Name, err)
	}
	return cfg, nil
}

// Arm returns the arm named name.
func (s *Spec) Arm(name string) (Arm, bool) {
	for _, a := range s.Arms {
		if a.Name == name {
			return a, true
		}
	}
	return Arm{}, false
}

// Validate resolves every arm-seed's config for a bench in dir and builds
// its task, algorithm and strategies (no model), so a bad key fails before
// anything runs; only must name arms of s.
func (s *Spec) Validate(dir string, only ...string) error {
	for _, o := range only {
		if _, ok := s.Arm(o); !ok {
			return fmt.Errorf("bench: --only %s: no such arm in %s", o, s.File)
		}
	}
	for _, arm := range s.Arms {
		for _, seed := range s.Seeds {
			cfg, err := s.ArmConfig(dir, arm, seed)
			if err != nil {
				return err
			}
			if seed != s.Seeds[0] {
				continue
			}
			if _, err := criticHeads(cfg); err != nil {
				return fmt.Errorf("bench %s: arm %s: %w", s.File, arm.Name, err)
			}
		}
	}
	return s.checkSharedBase(dir)
}

// criticHeads builds the task, algorithm and strategies of cfg (no model),
// which checks their keys, and returns the number of critic heads the run
// will have (0: no critic).
func criticHeads(cfg *trainer.Config) (int, error) {
	if _, err := tasks.New(core.NewParams("task", cfg.Task)); err != nil {
		return 0, err
	}
	algo, err := session.BuildAlgorithm(cfg)
	if err != nil {
		return 0, err
	}
	strats, _, err := session.BuildStrategies(cfg, algo, zerolog.Nop())
	if err != nil {
		return 0, err
	}
	defer core.CloseAll(strats)
	n, err := trainer.TrainNeeds(cfg, algo, strats)
	return n.ValueHeads, err
}
