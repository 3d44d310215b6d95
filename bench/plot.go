package bench

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/session"
)

// band is an arm's metric over steps: the mean over its seeds and the
// range (min, max) over them, at every step where any seed has a value.
type band struct {
	X, Mean, Lo, Hi []float64
}

// smoothSeries is the centred moving average of ys over a window of w
// points (shorter at the ends); w <= 1 returns ys.
func smoothSeries(ys []float64, w int) []float64 {
	if w <= 1 {
		return ys
	}
	out := make([]float64, len(ys))
	for i := range ys {
		lo, hi := max(0, i-w/2), min(len(ys), i+w/2+1)
		s := 0.0
		for _, y := range ys[lo:hi] {
			s += y
		}
		out[i] = s / float64(hi-lo)
	}
	return out
}

// rollingMedian is the centred moving median of ys over a window of w
// points (shorter at the ends); w <= 1 returns ys. Unlike a mean it
// ignores a one-step spike (a batch with one degenerate response).
func rollingMedian(ys []float64, w int) []float64 {
	if w <= 1 {
		return ys
	}
	out := make([]float64, len(ys))
	win := make([]float64, 0, w+1)
	for i := range ys {
		lo, hi := max(0, i-w/2), min(len(ys), i+w/2+1)
		win = append(win[:0], ys[lo:hi]...)
		slices.Sort(win)
		n := len(win)
		out[i] = (win[(n-1)/2] + win[n/2]) / 2
	}
	return out
}

// metricValue reads one metric of a row.
func metricValue(metric string) func(map[string]float64) (float64, bool) {
	return func(row map[string]float64) (float64, bool) {
		v, ok := row[metric]
		return v, ok
	}
}

// ratioValue reads num / den of a row.
func ratioValue(num, den string) func(map[string]float64) (float64, bool) {
	return func(row map[string]float64) (float64, bool) {
		a, okA := row[num]
		b, okB := row[den]
		if !okA || !okB || b == 0 {
			return 0, false
		}
		return a / b, true
	}
}

// GeneratedTotalMetric is the trainer's count of the responses generated
// from a run's start to the end of a step, dynamic sampling's dropped
// groups included; GeneratedMetric the step's own.
const (
	GeneratedTotalMetric = "train/generated_responses_total"
	GeneratedMetric      = "train/generated_responses"
)

// stepX is the x of every row of r on the step axis: its step.
func stepX(r *armRun) []float64 {
	xs := make([]float64, len(r.Rows))
	for i, row := range r.Rows {
		xs[i] = row["step"]
	}
	return xs
}

// samplesX is the x of every row of r on the generated-responses axis: the
// responses generated in the steps before the row's step (the row's
// GeneratedTotalMetric less its GeneratedMetric), so that step 0 is at 0
// as on the step axis, and an evaluation at step s, made before step s
// trains, sits at what the policy had generated. A row without them (the
// evaluation after the last step) takes the total of the rows before it.
// nil when no row of r has GeneratedTotalMetric (a run from before it).
func samplesX(r *armRun) []float64 {
	xs := make([]float64, len(r.Rows))
	total, found := 0.0, false
	for i, row := range r.Rows {
		t, ok := row[GeneratedTotalMetric]
		if !ok {
			xs[i] = total
			continue
		}
		found = true
		xs[i], total = t-row[GeneratedMetric], t
	}
	if !found {
		return nil
	}
	return xs
}

// family is a group of arms drawn in one panel.
type family struct {
	Name   string
	Critic bool
	Arms   []string
}

// accuracyRE matches the metric keys that are an accuracy in [0, 1].
var accuracyRE = regexp.MustCompile(`(^|/)((avg|pass|maj)@(\d+|k)|acc|accuracy)$`)

// isAccuracy reports whether metric key is an accuracy (avg@k, pass@k,
// maj@k, reward/acc), drawn on a y axis from 0 to 1.
func isAccuracy(key string) bool { return accuracyRE.MatchString(key) }

var evalKeyRE = regexp.MustCompile(`^val/([^/]+)/(avg|pass|maj)@(\d+|k)$`)

// axisLabel is the human label of a metric key on an axis; a key it does
// not know is written in words (its last part, underscores as spaces).
func axisLabel(key string) string {
	if m := evalKeyRE.FindStringSubmatch(key); m != nil {
		kind := map[string]string{"avg": "held-out accuracy", "pass": "pass@" + m[3], "maj": "majority-vote accuracy"}[m[2]]
		if m[2] == "pass" {
			if m[1] == "mean" {
				return kind + " (mean over eval sets)"
			}
			return kind + " on " + m[1]
		}
		if m[1] != "mean" {
			kind += " on " + m[1]
		}
		return kind + " (" + m[2] + "@" + m[3] + ")"
	}
	switch key {
	case "step":
		return "training step"
	case GeneratedTotalMetric:
		return "responses generated"
	case "reward/acc":
		return "training accuracy"
	case "reward/mean":
		return "training reward (batch mean)"
	case "rollout/entropy":
		return "policy entropy (nats per token)"
	case "calib/ppl_incorrect / calib/ppl_correct":
		return "PPL(incorrect) over PPL(correct)"
	case "calib/auroc":
		return "calibration AUROC"
	case "critic/head_std":
		return "critic head std"
	case "simhash/occupied_cells":
		return "SimHash occupied cells"
	}
	if m := distinctKeyRE.FindStringSubmatch(key); m != nil {
		return "distinct correct answers (distinct@" + m[2] + ")"
	}
	parts := strings.Split(key, "/")
	return strings.ReplaceAll(parts[len(parts)-1], "_", " ")
}

var distinctKeyRE = regexp.MustCompile(`^val/([^/]+)/distinct@(\d+)$`)

var passKeyRE = regexp.MustCompile(`^val/mean/pass@(\d+)$`)

// passCurve is pass@k vs k of eval set set at the final evaluation of each
// run of an arm: the mean and range over seeds for every k all its runs
// report.
func passCurve(rs []*armRun, set string, step func(*armRun) (map[string]float64, bool)) band {
	re := regexp.MustCompile(`^val/` + regexp.QuoteMeta(set) + `/pass@(\d+)$`)
	byK := map[int][]float64{}
	n := 0
	for _, r := range rs {
		row, ok := step(r)
		if !ok {
			continue
		}
		n++
		for key, v := range row {
			if m := re.FindStringSubmatch(key); m != nil {
				k, _ := strconv.Atoi(m[1])
				byK[k] = append(byK[k], v)
			}
		}
	}
	var b band
	var ks []int
	for k, v := range byK {
		if len(v) == n {
			ks = append(ks, k)
		}
	}
	sort.Ints(ks)
	for _, k := range ks {
		v := byK[k]
		b.X = append(b.X, float64(k))
		b.Mean = append(b.Mean, core.Mean(v))
		b.Lo = append(b.Lo, slices.Min(v))
		b.Hi = append(b.Hi, slices.Max(v))
	}
	return b
}

// lastEval is the last row of r with a val/mean/pass@ key; firstEval the
// first (the evaluation before training, when the run made one).
func lastEval(r *armRun) (map[string]float64, bool) {
	for i := len(r.Rows) - 1; i >= 0; i-- {
		for k := range r.Rows[i] {
			if passKeyRE.MatchString(k) {
				return r.Rows[i], true
			}
		}
	}
	return nil, false
}

func firstEval(r *armRun) (map[string]float64, bool) {
	for _, row := range r.Rows {
		if row["step"] != 0 {
			continue
		}
		for k := range row {
			if passKeyRE.MatchString(k) {
				return row, true
			}
		}
	}
	return nil, false
}

// armFamilies splits arms into the critic-free (GRPO-like) and the
// critic-based (PPO-like) family, each drawn in its own panel; one family
// when every arm is of one kind.
func armFamilies(spec *Spec, dir string, arms []string) ([]family, error) {
	free := family{Name: "critic-free (GRPO family)"}
	critic := family{Name: "with a critic (PPO family)", Critic: true}
	for _, name := range arms {
		i := slices.IndexFunc(spec.Arms, func(a Arm) bool { return a.Name == name })
		if i < 0 || len(spec.Seeds) == 0 {
			return nil, fmt.Errorf("plots: no arm %q in the bench file", name)
		}
		cfg, err := spec.ArmConfig(dir, spec.Arms[i], spec.Seeds[0])
		if err != nil {
			return nil, err
		}
		algo, err := session.BuildAlgorithm(cfg)
		if err != nil {
			return nil, fmt.Errorf("plots: arm %s: %w", name, err)
		}
		if algo.NeedsCritic() {
			critic.Arms = append(critic.Arms, name)
		} else {
			free.Arms = append(free.Arms, name)
		}
	}
	var out []family
	for _, f := range []family{free, critic} {
		if len(f.Arms) > 0 {
			out = append(out, f)
		}
	}
	return out, nil
}
