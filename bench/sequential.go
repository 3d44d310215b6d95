package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/cde-rl/cde/core"
)

// A sequential bench (`cde-run bench --until-conclusive --max-seeds N`,
// docs/bench.md "Sequential seeds") runs the registered seeds, judges the
// claims (look 1), then adds seeds in stages only to the arms of the
// claims still inconclusive after their family's correction, judging
// again after each stage, up to N seeds per arm. Each look k tests at its
// own level: the increment alpha_k = f(t_k) - f(t_(k-1)) of an
// alpha-spending function f over the information fraction t = seeds / N,
// per side, so over all looks the error per side is at most f(1) = 2.5%
// by the union bound, whatever the looks' correlation. A claim decided at
// a look keeps that verdict. Everything is replayed from the finished
// runs, so a rerun of the same command resumes and --report-only gives
// the same verdicts.

// SequentialFile records a sequential bench's plan in its results
// directory when it first starts; later invocations (resuming, reporting,
// Slurm workers) follow it.
const SequentialFile = "sequential.json"

// Spending functions (Lan & DeMets 1983) by name.
const (
	SpendPocock = "pocock" // alpha ln(1 + (e-1) t): Pocock-type (Pocock 1977)
	SpendOBF    = "obf"    // 2 - 2 Phi(z_(1-alpha/2) / sqrt(t)): O'Brien-Fleming-type (O'Brien & Fleming 1979)
)

// Spendings are the spending functions --spending accepts.
var Spendings = []string{SpendPocock, SpendOBF}

// DefaultStageSeeds is the seeds a stage adds per arm unless
// --stage-seeds says otherwise.
const DefaultStageSeeds = 2

// SeqPlan is a sequential bench's plan (SequentialFile).
type SeqPlan struct {
	MaxSeeds   int      `json:"max_seeds"`        // N: the most seeds an arm runs
	StageSeeds int      `json:"stage_seeds"`      // seeds a stage adds
	Spending   string   `json:"spending"`         // SpendPocock or SpendOBF
	Registered []uint64 `json:"registered_seeds"` // the bench file's seeds: look 1
	Started    string   `json:"started,omitempty"`
}

// spend is the error per side the spending function allows up to
// information fraction t (0 at t <= 0, 2.5% at t = 1).
func spend(kind string, t float64) float64 {
	const a = claimAlpha / 2 // per side
	if t <= 0 {
		return 0
	}
	t = min(t, 1)
	switch kind {
	case SpendOBF:
		z := distuv.UnitNormal.Quantile(1 - a/2)
		return 2 * distuv.UnitNormal.Survival(z/math.Sqrt(t))
	default:
		return a * math.Log(1+(math.E-1)*t)
	}
}

// seeds is every seed an arm may run: the registered ones, then the
// seeds after the largest of them, up to MaxSeeds in all.
func (p *SeqPlan) seeds() []uint64 {
	out := slices.Clone(p.Registered)
	next := slices.Max(p.Registered) + 1
	for len(out) < p.MaxSeeds {
		out = append(out, next)
		next++
	}
	return out
}

// looks are the seeds per arm at each look: the registered count, then
// StageSeeds more a stage, the last capped at MaxSeeds.
func (p *SeqPlan) looks() []int {
	var n []int
	for s := len(p.Registered); ; s += p.StageSeeds {
		n = append(n, min(s, p.MaxSeeds))
		if s >= p.MaxSeeds {
			return n
		}
	}
}

// alpha is look k's error per side: the spending function's increment
// since look k-1.
func (p *SeqPlan) alpha(k int) float64 {
	n := p.looks()
	prev := 0.0
	if k > 0 {
		prev = spend(p.Spending, float64(n[k-1])/float64(p.MaxSeeds))
	}
	return spend(p.Spending, float64(n[k])/float64(p.MaxSeeds)) - prev
}

// spendingText names the plan's spending function with its formula.
func (p *SeqPlan) spendingText() string {
	if p.Spending == SpendOBF {
		return "O'Brien-Fleming-type alpha(t) = 2 - 2 Phi(z(0.9875) / sqrt(t))"
	}
	return "Pocock-type alpha(t) = 0.025 ln(1 + (e-1) t)"
}

// flags are the plan as cde-run bench flags.
func (p *SeqPlan) flags() string {
	s := fmt.Sprintf("--until-conclusive --max-seeds %d", p.MaxSeeds)
	if p.StageSeeds != DefaultStageSeeds {
		s += fmt.Sprintf(" --stage-seeds %d", p.StageSeeds)
	}
	if p.Spending != SpendPocock {
		s += " --spending " + p.Spending
	}
	return s
}

// readSeqPlan reads DIR/SequentialFile: nil when dir is no sequential
// bench.
func readSeqPlan(dir string) (*SeqPlan, error) {
	data, err := os.ReadFile(filepath.Join(dir, SequentialFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p SeqPlan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SequentialFile), err)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SequentialFile), err)
	}
	return &p, nil
}

func (p *SeqPlan) check() error {
	switch {
	case len(p.Registered) < minSeeds:
		return fmt.Errorf("--until-conclusive: the bench registers %d seed(s); the first look needs at least %d (a verdict's minimum)", len(p.Registered), minSeeds)
	case p.MaxSeeds <= len(p.Registered):
		return fmt.Errorf("--max-seeds %d: want more than the %d registered seeds", p.MaxSeeds, len(p.Registered))
	case p.StageSeeds < 1:
		return fmt.Errorf("--stage-seeds %d: want at least 1", p.StageSeeds)
	case !slices.Contains(Spendings, p.Spending):
		return fmt.Errorf("--spending %q: want one of %s", p.Spending, strings.Join(Spendings, ", "))
	}
	return nil
}

// sequentialPlan is the plan of the bench in o.Dir: the one recorded there
// (o's flags, when given, must agree with it), else, with o.MaxSeeds set,
// a new one (recorded when record is true: Run). nil: a plain bench.
func sequentialPlan(spec *Spec, o Options, record bool) (*SeqPlan, error) {
	old, err := readSeqPlan(o.Dir)
	if err != nil {
		return nil, err
	}
	var want *SeqPlan
	if o.MaxSeeds > 0 {
		want = &SeqPlan{MaxSeeds: o.MaxSeeds, StageSeeds: cmp0(o.StageSeeds, DefaultStageSeeds), Spending: cmp0(o.Spending, SpendPocock),
			Registered: slices.Clone(spec.Seeds)}
		if err := want.check(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if len(o.Only) > 0 {
			return nil, errors.New("bench: --only cannot be combined with --until-conclusive: the claims decide which arms get seeds")
		}
	}
	if old != nil {
		if !slices.Equal(old.Registered, spec.Seeds) {
			return nil, fmt.Errorf("bench: %s: the sequential bench started with seeds %s; the bench file now lists %s",
				filepath.Join(o.Dir, SequentialFile), joinSeeds(old.Registered), joinSeeds(spec.Seeds))
		}
		if want != nil && (want.MaxSeeds != old.MaxSeeds || want.StageSeeds != old.StageSeeds || want.Spending != old.Spending) {
			return nil, fmt.Errorf("bench: %s is a sequential bench with %s; its looks' levels follow from them, so they cannot change: rerun with those flags, or use another --out",
				o.Dir, old.flags())
		}
		return old, nil
	}
	if want == nil {
		return nil, nil
	}
	if !record {
		return nil, fmt.Errorf("bench: %s: no sequential bench there (no %s): --until-conclusive applies to a bench that started with it", o.Dir, SequentialFile)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, VerdictsFile)); err == nil {
		return nil, fmt.Errorf("bench: %s already has verdicts from a plain bench (%s): a sequential rule chosen after seeing them does not keep its error rate; use another --out",
			o.Dir, VerdictsFile)
	}
	want.Started = time.Now().UTC().Format(time.RFC3339)
	data, _ := json.MarshalIndent(want, "", "  ")
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	return want, core.WriteFileAtomic(filepath.Join(o.Dir, SequentialFile), append(data, '\n'))
}

func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// withSeeds is spec with other seeds (a shallow copy).
func (s *Spec) withSeeds(seeds []uint64) *Spec {
	c := *s
	c.Seeds = seeds
	return &c
}

// sequentialSeeds is spec with every seed of dir's sequential plan (spec
// itself for a plain bench), and the seeds beyond the registered ones.
func sequentialSeeds(spec *Spec, dir string) (*Spec, map[uint64]bool, error) {
	p, err := readSeqPlan(dir)
	if err != nil || p == nil {
		return spec, nil, err
	}
	if !slices.Equal(spec.Seeds, p.Registered) && !slices.Equal(spec.Seeds, p.seeds()) {
		return nil, nil, fmt.Errorf("bench: %s: the sequential bench started with seeds %s; the bench file now lists %s",
			filepath.Join(dir, SequentialFile), joinSeeds(p.Registered), joinSeeds(spec.Seeds))
	}
	extra := map[uint64]bool{}
	for _, s := range p.seeds()[len(p.Registered):] {
		extra[s] = true
	}
	return spec.withSeeds(p.seeds()), extra, nil
}

// SeqLook is a claim's sequential record in verdicts.json ("sequential").
type SeqLook struct {
	// Look (1-based) is the look whose judgement the entry is: the one
	// that decided the verdict after Holm, else the last look taken.
	Look    int  `json:"look"`
	Decided bool `json:"decided"` // the verdict after Holm was decided at Look
	// OwnLook is the look that decided the claim's own verdict (0: none).
	OwnLook int `json:"own_look,omitempty"`
	// SeedsPlanned is the schedule's seeds per arm at Look; the seeds the
	// claim was judged on are the entry's "seeds".
	SeedsPlanned int `json:"seeds_planned"`
	// Alpha is Look's error per side (the spending increment), Spent the
	// spending function through Look, Level the interval's two-sided
	// level at Look, 1 - 2 Alpha (ci_low and ci_high are at it).
	Alpha float64 `json:"alpha_look"`
	Spent float64 `json:"alpha_spent"`
	Level float64 `json:"level"`
	// MaxSeeds, Looks (in the schedule) and Spending restate the plan.
	MaxSeeds int    `json:"max_seeds"`
	Looks    int    `json:"looks_planned"`
	Spending string `json:"spending"`
}

// seqState is where a sequential bench stands after replaying its looks.
type seqState struct {
	taken int // looks taken
	// next is the look the bench waits for (its stage trains next); -1
	// when no look is left: every claim decided, or the last look taken.
	next int
	// waiting are the claims look next judges (those undecided after the
	// last look taken); missing the arm-seeds it still needs.
	waiting []int
	missing []string
}

func decisive(verdict string) bool {
	return verdict == "held" || verdict == "not held" || verdict == "equivalent"
}

// rule applies the sequential rule to claims: at look k = 0, 1, ... every
// claim not yet decided (after Holm) is judged by judge(k, i, level) at
// level 1 - 2 alpha_k, Holm's correction is applied within each family
// to the claims judged at that look at its two-sided alpha 2 alpha_k
// (holmAt), and a claim whose verdict after Holm is held, not held or
// equivalent is decided: later looks do not judge it. A claim's own
// verdict is kept from the first look that decided it. ready(k, claims)
// says whether look k can be taken (the runs it needs are finished);
// exploratory claims are judged at the first look only and decide
// nothing.
func (p *SeqPlan) rule(claims []Claim, exploratory []bool, ready func(k int, claims []int) (bool, []string),
	judge func(k, i int, level float64) ClaimVerdict) ([]ClaimVerdict, seqState) {
	n := len(claims)
	out := make([]ClaimVerdict, n)
	decided := make([]bool, n)
	ownLook := make([]int, n)
	looks := p.looks()
	st := seqState{next: -1}
	for k := range looks {
		var cur []int
		for i := range n {
			if k == 0 || !decided[i] {
				cur = append(cur, i)
			}
		}
		if len(cur) == 0 {
			break
		}
		if ok, missing := ready(k, cur); !ok {
			st.next, st.waiting, st.missing = k, cur, missing
			break
		}
		a := p.alpha(k)
		for _, i := range cur {
			v := judge(k, i, 1-2*a)
			switch {
			case exploratory[i]:
				v.Note = strings.TrimPrefix(v.Note+"; judged "+v.Verdict+" at the first look, but registered after the bench started", "; ")
				v.Verdict = "exploratory"
				decided[i] = true
			case ownLook[i] > 0:
				if v.Verdict != out[i].Verdict {
					v.Note = strings.TrimPrefix(v.Note+fmt.Sprintf("; its own verdict was decided at look %d (%s) and is kept (this look alone: %s)",
						ownLook[i], out[i].Verdict, v.Verdict), "; ")
				}
				v.Verdict = out[i].Verdict
			case decisive(v.Verdict):
				ownLook[i] = k + 1
			}
			out[i] = v
		}
		holmAt(out, cur, 2*a)
		for _, i := range cur {
			if decisive(out[i].VerdictHolm) {
				decided[i] = true
			}
			out[i].Sequential = &SeqLook{Look: k + 1, Decided: decided[i] && !exploratory[i], OwnLook: ownLook[i], SeedsPlanned: looks[k],
				Alpha: a, Spent: spend(p.Spending, float64(looks[k])/float64(p.MaxSeeds)), Level: 1 - 2*a,
				MaxSeeds: p.MaxSeeds, Looks: len(looks), Spending: p.Spending}
		}
		st.taken = k + 1
	}
	return out, st
}

// holmAt applies Holm's correction within each family to the claims idx
// of vs judged at one look, at two-sided alpha alpha2: adjustFamilies
// adjusts their p values (and the equivalence p values), then each tested
// claim's verdict after Holm is held or not held (by the effect's sign)
// where its adjusted p is below alpha2, equivalent where its adjusted
// equivalence p is, else inconclusive. A claim not tested keeps its own
// verdict.
func holmAt(vs []ClaimVerdict, idx []int, alpha2 float64) {
	sub := make([]ClaimVerdict, len(idx))
	for j, i := range idx {
		sub[j] = vs[i]
	}
	adjustFamilies(sub)
	for j, i := range idx {
		v := sub[j]
		if v.tested() && v.PHolm != nil {
			switch {
			case *v.PHolm < alpha2 && *v.DeltaMean > 0:
				v.VerdictHolm = "held"
			case *v.PHolm < alpha2:
				v.VerdictHolm = "not held"
			case v.PEquivHolm != nil && *v.PEquivHolm < alpha2:
				v.VerdictHolm = "equivalent"
			default:
				v.VerdictHolm = "inconclusive"
			}
		}
		vs[i] = v
	}
}

// judgeSequential judges spec's claims on the runs of a sequential bench
// (replaying every look the finished runs allow), as judgeClaims does a
// plain bench's; each sees each claim's final judgement.
func (p *SeqPlan) judgeSequential(spec *Spec, dir string, runs map[string][]*armRun, reg *registration,
	each func(Claim, ClaimVerdict, []PairedSeed, Design)) ([]ClaimVerdict, seqState) {
	all := p.seeds()
	looks := p.looks()
	expl := make([]bool, len(spec.Claims))
	for i, c := range spec.Claims {
		expl[i] = reg.exploratory(c)
	}
	done := map[string]bool{}
	for arm, rs := range runs {
		for _, r := range rs {
			done[taskKey(arm, r.Seed)] = true
		}
	}
	ready := func(k int, claims []int) (bool, []string) {
		var missing []string
		for _, arm := range claimArms(spec, claims) {
			for _, s := range all[:looks[k]] {
				if !done[taskKey(arm, s)] {
					missing = append(missing, fmt.Sprintf("%s seed %d", arm, s))
				}
			}
		}
		return len(missing) == 0, missing
	}
	type judged struct {
		seeds  []PairedSeed
		design Design
	}
	last := make([]judged, len(spec.Claims))
	judge := func(k, i int, level float64) ClaimVerdict {
		in := map[uint64]bool{}
		for _, s := range all[:looks[k]] {
			in[s] = true
		}
		sub := map[string][]*armRun{}
		for arm, rs := range runs {
			for _, r := range rs {
				if in[r.Seed] {
					sub[arm] = append(sub[arm], r)
				}
			}
		}
		v, seeds, design := judgeClaimAt(spec.Claims[i], dir, sub, level)
		last[i] = judged{seeds, design}
		return v
	}
	out, st := p.rule(spec.Claims, expl, ready, judge)
	for i, c := range spec.Claims {
		if out[i].Sequential == nil {
			// Look 1 is not taken yet.
			out[i] = ClaimVerdict{Claim: c.Name, Metric: c.Metric, Arms: []string{c.Better, c.Than}, Family: c.family(), Margin: c.Margin,
				Verdict: "inconclusive", VerdictHolm: "inconclusive", Units: "none",
				Note: "sequential bench: look 1 waits for " + strings.Join(st.missing, ", ")}
			if expl[i] {
				out[i].Verdict, out[i].VerdictHolm = "exploratory", "exploratory"
			}
			continue
		}
		if each != nil {
			each(c, out[i], last[i].seeds, last[i].design)
		}
	}
	return out, st
}

// claimArms are the arms (base included) of the claims idx, in bench
// order.
func claimArms(spec *Spec, idx []int) []string {
	want := map[string]bool{}
	for _, i := range idx {
		want[spec.Claims[i].Better], want[spec.Claims[i].Than] = true, true
	}
	var arms []string
	if want[BaseArm] {
		arms = append(arms, BaseArm)
	}
	for _, a := range spec.Arms {
		if want[a.Name] {
			arms = append(arms, a.Name)
		}
	}
	return arms
}

// sequentialVerdicts judges the claims of dir's sequential bench; ok
// false for a plain bench.
func sequentialVerdicts(spec *Spec, dir string, runs map[string][]*armRun, reg *registration,
	each func(Claim, ClaimVerdict, []PairedSeed, Design)) ([]ClaimVerdict, bool) {
	p, err := readSeqPlan(dir)
	if err != nil || p == nil {
		return nil, false
	}
	out, _ := p.judgeSequential(spec, dir, runs, reg, each)
	return out, true
}

// seqStage is what look st.next needs trained: spec with the look's seeds
// and, after the first look, only the arms of the claims it judges (Only;
// the base evaluation only when a claim compares with the base).
func (p *SeqPlan) seqStage(full *Spec, st seqState) (*Spec, []string) {
	stage := full.withSeeds(p.seeds()[:p.looks()[st.next]])
	if st.next == 0 {
		return stage, nil
	}
	var only []string
	for _, a := range claimArms(full, st.waiting) {
		if a != BaseArm {
			only = append(only, a)
		}
	}
	stage.BaseEval = full.BaseEval && slices.Contains(claimArms(full, st.waiting), BaseArm)
	return stage, only
}

// seqReplay loads dir's finished runs and replays the looks.
func (p *SeqPlan) seqReplay(full *Spec, dir string) ([]ClaimVerdict, seqState, error) {
	runs, _, err := loadRuns(full, dir)
	if err != nil {
		return nil, seqState{}, err
	}
	reg, err := registered(dir)
	if err != nil {
		return nil, seqState{}, err
	}
	out, st := p.judgeSequential(full, dir, runs, reg, nil)
	return out, st, nil
}

// runSequential is Run's training for a sequential bench: stage after
// stage, each the arm-seeds the next look needs (trainStage: the local
// executor or Slurm), until no look is left. The stage to train is worked
// out from the finished runs each time, so a rerun resumes where the
// bench stopped.
func runSequential(ctx context.Context, spec *Spec, o Options, p *SeqPlan, trainStage func(context.Context, *Spec, Options) error) error {
	full := spec.withSeeds(p.seeds())
	out := o.out()
	looks := p.looks()
	trained := -1
	for {
		vs, st, err := p.seqReplay(full, o.Dir)
		if err != nil {
			return err
		}
		if st.taken > 0 {
			fmt.Fprintf(out, "bench: sequential: %s\n", seqLookLine(vs, st, looks))
		}
		if st.next < 0 {
			return nil
		}
		if st.next == trained {
			return fmt.Errorf("bench: sequential: look %d still waits for %s after its stage trained", st.next+1, strings.Join(st.missing, ", "))
		}
		stage, only := p.seqStage(full, st)
		arms := "every arm"
		if only != nil {
			arms = strings.Join(claimArms(full, st.waiting), ", ")
		}
		fmt.Fprintf(out, "bench: sequential: stage %d of at most %d: %s at seeds %s (look %d at %d seeds, alpha %s per side)\n",
			st.next+1, len(looks), arms, joinSeeds(stage.Seeds), st.next+1, looks[st.next], fmtP(p.alpha(st.next)))
		so := o
		so.Only = only
		if err := trainStage(ctx, stage, so); err != nil {
			return err
		}
		trained = st.next
	}
}

// seqLookLine sums up the looks taken.
func seqLookLine(vs []ClaimVerdict, st seqState, looks []int) string {
	decided := 0
	for _, v := range vs {
		if v.Sequential != nil && v.Sequential.Decided {
			decided++
		}
	}
	s := fmt.Sprintf("%d of %d look(s) taken (seeds %s); %d of %d claim(s) decided", st.taken, len(looks),
		joinInts(looks[:st.taken]), decided, len(vs))
	if st.next < 0 {
		if st.taken == len(looks) && decided < len(vs) {
			s += "; the last look is taken: the rest stay inconclusive"
		}
		return s
	}
	return s + fmt.Sprintf("; %d go on to look %d", len(st.waiting), st.next+1)
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}

// SequentialWorkerSpec is the spec a Slurm worker of the bench in dir
// runs (`cde-run bench --worker WHAT`): for a sequential bench, arm-seed
// numbers count over every seed of its plan (a stage's seeds are a prefix
// of them, so a stage numbers its arm-seeds as the whole plan does), and
// the base job makes what the stage waiting to train needs; spec itself
// for a plain bench.
func SequentialWorkerSpec(spec *Spec, dir, what string) (*Spec, error) {
	p, err := readSeqPlan(dir)
	if err != nil || p == nil {
		return spec, err
	}
	full := spec.withSeeds(p.seeds())
	if what != "base" {
		return full, nil
	}
	_, st, err := p.seqReplay(full, dir)
	if err != nil || st.next < 0 {
		return full.withSeeds(p.Registered), err
	}
	stage, only := p.seqStage(full, st)
	if only != nil {
		var arms []Arm
		for _, a := range stage.Arms {
			if slices.Contains(only, a.Name) {
				arms = append(arms, a)
			}
		}
		stage.Arms = arms
	}
	return stage, nil
}

// sequentialHeader is the report's line on a sequential bench ("" for a
// plain one).
func sequentialHeader(spec *Spec, dir string) string {
	p, err := readSeqPlan(dir)
	if err != nil || p == nil {
		return ""
	}
	full := spec.withSeeds(p.seeds())
	vs, st, err := p.seqReplay(full, dir)
	if err != nil {
		return ""
	}
	looks := p.looks()
	s := fmt.Sprintf("**Sequential bench** (`%s`): the registered seeds (%s) first, then %d seed(s) a stage, only for the arms of claims still "+
		"inconclusive after Holm, up to %d per arm; looks at %s seeds, each at the increment of the %s spending function (the Claims "+
		"section's Sequential looks table). %s.", p.flags(), joinSeeds(p.Registered), p.StageSeeds, p.MaxSeeds, joinInts(looks), p.spendingText(),
		seqLookLine(vs, st, looks))
	if st.next >= 0 {
		s += fmt.Sprintf(" Look %d waits for %s.", st.next+1, strings.Join(st.missing, ", "))
	}
	return s + "\n\n"
}

// writeSequentialSection is the Claims section's table of looks on a
// sequential bench (nothing on a plain one).
func writeSequentialSection(b *strings.Builder, dir string, vs []ClaimVerdict) {
	p, err := readSeqPlan(dir)
	if err != nil || p == nil {
		return
	}
	looks := p.looks()
	fmt.Fprintf(b, "\n### Sequential looks\n\nThis bench ran sequentially (`%s`): look 1 at the registered seeds, then each stage added %d seed(s) "+
		"to the arms of the claims still inconclusive after Holm, up to %d, for looks at %s seeds. Look k tests at its own error per side, "+
		"alpha_k = alpha(t_k) - alpha(t_(k-1)) with t = seeds / %d and the %s spending function (Lan & DeMets 1983): its interval is at "+
		"level 1 - 2 alpha_k (the table above shows it, not 95%%), and Holm's correction within a family is over the claims judged at "+
		"that look at two-sided 2 alpha_k. Over all looks the error per side is at most alpha(1) = 2.5%% (a union bound). A claim decided "+
		"(after Holm) at a look keeps that verdict and is not judged again; its own verdict likewise keeps the look that first decided it.\n\n",
		p.flags(), p.StageSeeds, p.MaxSeeds, joinInts(looks), p.MaxSeeds, p.spendingText())
	b.WriteString("| look | seeds | alpha per side | spent | level |\n|---|---|---|---|---|\n")
	for k, n := range looks {
		fmt.Fprintf(b, "| %d | %d | %s | %s | %s |\n", k+1, n, fmtP(p.alpha(k)), fmtP(spend(p.Spending, float64(n)/float64(p.MaxSeeds))),
			strconv.FormatFloat(1-2*p.alpha(k), 'f', 5, 64))
	}
	b.WriteString("\n| claim | decided at look | seeds judged | alpha per side at that look | own verdict (look) | verdict after Holm |\n|---|---|---|---|---|---|\n")
	for _, v := range vs {
		sq := v.Sequential
		if sq == nil {
			fmt.Fprintf(b, "| %s | look 1 not taken | %d | - | %s | **%s** |\n", v.Claim, len(v.Seeds), v.Verdict, v.VerdictHolm)
			continue
		}
		at := fmt.Sprintf("%d", sq.Look)
		if !sq.Decided {
			at = fmt.Sprintf("not decided (last look %d)", sq.Look)
		}
		own := v.Verdict
		if sq.OwnLook > 0 {
			own += fmt.Sprintf(" (look %d)", sq.OwnLook)
		}
		fmt.Fprintf(b, "| %s | %s | %d (%s) | %s | %s | **%s** |\n", v.Claim, at, len(v.Seeds), joinSeeds(v.Seeds), fmtP(sq.Alpha), own, v.VerdictHolm)
	}
}
