package plugins

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzCheckOutputs feeds the host's checks of plugin outputs (check.go)
// random answers for random batch shapes and weights. They must never
// panic, and must accept exactly the answers that the restatement of the
// protocol's rules below accepts, returning exactly the expected output.
//
// Inputs: hook picks the check (reward bonus, advantage bonus, loss
// terms, head masks, observe); shape gives the batch (number of
// sequences, their token counts, K) and the answer's shape as deviations
// from the expected one (mostly 0, so valid answers are common); vals
// picks numbers and metric names from small tables of ordinary and edge
// values (0, -0, huge, tiny, NaN, +-Inf); w is the entry's weight.
func FuzzCheckOutputs(f *testing.F) {
	f.Add(uint8(0), []byte{3, 2, 0, 5, 2, 0}, []byte{0, 1, 2, 3}, 1.0)
	f.Add(uint8(0), []byte{2, 1, 1, 0, 0}, []byte{9, 1}, 2.0)
	f.Add(uint8(1), []byte{2, 2, 3, 0, 0, 0, 0}, []byte{1, 2, 3, 4, 5, 6}, 0.5)
	f.Add(uint8(1), []byte{2, 2, 3, 0, 0, 0x81, 0}, []byte{1, 2, 3, 4, 5, 6}, 1.0)
	f.Add(uint8(2), []byte{0}, []byte{3}, 3.0)
	f.Add(uint8(2), []byte{0}, []byte{5}, 1e308)
	f.Add(uint8(3), []byte{2, 2, 1, 2, 0, 0, 0, 0}, []byte{2, 2, 2, 2, 0, 2, 2, 2}, 1.0)
	f.Add(uint8(3), []byte{2, 2, 1, 2, 0, 0, 0x80, 0}, []byte{2, 2, 2, 2}, 1.0)
	f.Add(uint8(4), []byte{3}, []byte{1, 2, 2, 3, 3, 4}, 1.0)
	f.Add(uint8(4), []byte{2}, []byte{1, 2, 6, 3}, 0.25)
	f.Add(uint8(4), []byte{1}, []byte{7, 2}, math.NaN())
	f.Fuzz(func(t *testing.T, hook uint8, shape, vals []byte, w float64) {
		in := &fuzzInput{shape: shape, vals: vals}
		switch hook % 5 {
		case 0:
			fuzzReward(t, in, w)
		case 1:
			fuzzAdvantage(t, in, w)
		case 2:
			fuzzLoss(t, in, w)
		case 3:
			fuzzHeadMasks(t, in)
		case 4:
			fuzzObserve(t, in, w)
		}
	})
}

// fuzzInput hands out shape bytes and values; past the end, zeros.
type fuzzInput struct {
	shape, vals []byte
	si, vi      int
}

func (in *fuzzInput) byte() byte {
	if in.si >= len(in.shape) {
		return 0
	}
	in.si++
	return in.shape[in.si-1]
}

// seqLens reads a batch: up to 8 sequences of up to 7 tokens.
func (in *fuzzInput) seqLens() []int {
	n := int(in.byte() % 9)
	lens := make([]int, n)
	for i := range lens {
		lens[i] = int(in.byte() % 8)
	}
	return lens
}

// deviate returns want, or want plus a small signed offset when the high
// bit of the next shape byte is set.
func (in *fuzzInput) deviate(want int) int {
	b := in.byte()
	if b&0x80 == 0 {
		return want
	}
	return want + int(int8(b<<1))/2 // -64..63
}

var fuzzValues = []float64{0, 1, 0.5, -1, -0.25, 2, 1e-300, 5e-324, 1e308, -1e308, math.MaxFloat64,
	math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 3.75, -1e-12, 123456789}

func (in *fuzzInput) value() float64 {
	if in.vi >= len(in.vals) {
		return 0
	}
	in.vi++
	return fuzzValues[int(in.vals[in.vi-1])%len(fuzzValues)]
}

func (in *fuzzInput) values(n int) []float64 {
	if n < 0 {
		n = 0
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = in.value()
	}
	return out
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// verdict fails the test when the check's acceptance differs from the
// restated rules'.
func verdict(t *testing.T, what string, valid bool, err error) {
	t.Helper()
	if valid && err != nil {
		t.Fatalf("%s: rejected a valid answer: %v", what, err)
	}
	if !valid && err == nil {
		t.Fatalf("%s: accepted an invalid answer", what)
	}
	if err != nil && err.Error() == "" {
		t.Fatalf("%s: empty error message", what)
	}
}

func fuzzReward(t *testing.T, in *fuzzInput, w float64) {
	n := int(in.byte() % 9)
	bonus := in.values(in.deviate(n))
	orig := append([]float64(nil), bonus...)
	got, err := checkRewardBonus(bonus, n, w)
	// Valid: one finite bonus per sequence, a finite weight, finite products.
	valid := len(orig) == n && isFinite(w)
	for _, b := range orig {
		valid = valid && isFinite(b) && isFinite(w*b)
	}
	verdict(t, "RewardBonus", valid, err)
	if err != nil {
		return
	}
	for i, b := range orig {
		if !same(got[i], w*b) {
			t.Fatalf("RewardBonus: bonus %d = %v, want %v * %v", i, got[i], w, b)
		}
	}
}

func fuzzAdvantage(t *testing.T, in *fuzzInput, w float64) {
	lens := in.seqLens()
	rows := in.deviate(len(lens))
	lengths := make([]int32, max(rows, 0))
	total := 0
	for i := range lengths {
		want := 0
		if i < len(lens) {
			want = lens[i]
		}
		lengths[i] = int32(in.deviate(want))
		total += int(lengths[i])
	}
	bonus := in.values(in.deviate(total))
	orig := append([]float64(nil), bonus...)
	got, err := checkAdvantageBonus(lengths, bonus, lens, w, false)
	// Valid: one row per sequence, row i of exactly lens[i] entries, the
	// packed bonuses exactly as many as the rows' sum, all finite, a
	// finite weight, finite products.
	valid := len(lengths) == len(lens) && len(orig) == total && isFinite(w)
	for i := 0; valid && i < len(lens); i++ {
		valid = int(lengths[i]) == lens[i]
	}
	for _, b := range orig {
		valid = valid && isFinite(b) && isFinite(w*b)
	}
	verdict(t, "AdvantageBonus", valid, err)
	if err != nil {
		return
	}
	if len(got) != len(lens) {
		t.Fatalf("AdvantageBonus: %d rows for %d sequences", len(got), len(lens))
	}
	off := 0
	for i, row := range got {
		if len(row) != lens[i] {
			t.Fatalf("AdvantageBonus: row %d has %d entries, want %d", i, len(row), lens[i])
		}
		for j, x := range row {
			if !same(x, w*orig[off+j]) {
				t.Fatalf("AdvantageBonus: row %d token %d = %v, want %v * %v", i, j, x, w, orig[off+j])
			}
		}
		off += lens[i]
	}
}

func fuzzLoss(t *testing.T, in *fuzzInput, w float64) {
	coef := in.value()
	got, err := checkLossTerms(coef, w)
	verdict(t, "LossTerms", isFinite(coef) && isFinite(w) && isFinite(w*coef), err)
	if err == nil && !same(got, w*coef) {
		t.Fatalf("LossTerms: %v, want %v * %v", got, w, coef)
	}
}

func fuzzHeadMasks(t *testing.T, in *fuzzInput) {
	lens := in.seqLens()
	k := int(in.byte() % 5)
	nrows := in.deviate(len(lens))
	rows := make([]int32, max(nrows, 0))
	total := 0
	for i := range rows {
		want := 0
		if i < len(lens) {
			want = lens[i]
		}
		if in.byte()%4 == 0 { // no mask for this sequence
			want = 0
		}
		rows[i] = int32(in.deviate(want))
		total += int(rows[i])
	}
	masks := in.values(in.deviate(total * k))
	got, err := checkHeadMasks(rows, masks, lens, k)
	// Valid: one entry per sequence, each 0 (no mask) or the sequence's
	// token count, exactly rows x K entries in all, each finite and >= 0.
	valid := len(rows) == len(lens) && len(masks) == total*k
	for i := 0; valid && i < len(lens); i++ {
		valid = rows[i] == 0 || int(rows[i]) == lens[i]
	}
	for _, x := range masks {
		valid = valid && isFinite(x) && x >= 0
	}
	verdict(t, "HeadMasks", valid, err)
	if err != nil {
		return
	}
	off := 0
	for i, m := range got {
		if rows[i] == 0 {
			if m != nil {
				t.Fatalf("HeadMasks: sequence %d has a mask, want none", i)
			}
			continue
		}
		if len(m) != lens[i]*k {
			t.Fatalf("HeadMasks: sequence %d has %d entries, want %d tokens x %d heads", i, len(m), lens[i], k)
		}
		for j := range m {
			if !same(m[j], masks[off+j]) {
				t.Fatalf("HeadMasks: entry %v, want %v", m[j], masks[off+j])
			}
		}
		off += len(m)
	}
}

var fuzzMetricNames = []string{"", "a", "weight", "explore/x/a", "explore/x/weight", "explore/y/a", "x/a",
	"explore/x/", "explore/x", "b", "explore/x/explore/x/a", "explore/weight"}

func fuzzObserve(t *testing.T, in *fuzzInput, w float64) {
	const name = "x"
	weighted := in.byte()%2 == 1
	n := int(in.byte() % 7)
	var metrics map[string]float64
	if n > 0 || in.byte()%2 == 0 {
		metrics = map[string]float64{}
	}
	for range n {
		k := fuzzMetricNames[int(in.byte())%len(fuzzMetricNames)]
		metrics[k] = in.value()
	}
	got, err := checkObserve(metrics, name, weighted, w)
	// Valid: no empty name, finite values; the names, each put under
	// explore/x/ unless already there, stay distinct; with a weight, the
	// weight is finite and no name becomes explore/x/weight.
	want := map[string]float64{}
	valid := !weighted || isFinite(w)
	for k, v := range metrics {
		full := k
		if !strings.HasPrefix(k, "explore/x/") {
			full = "explore/x/" + k
		}
		if _, dup := want[full]; dup || k == "" || !isFinite(v) || weighted && full == "explore/x/weight" {
			valid = false
		}
		want[full] = v
	}
	if weighted {
		want["explore/x/weight"] = w
	}
	verdict(t, "Observe", valid, err)
	if err != nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("Observe: %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !same(g, v) {
			t.Fatalf("Observe: %v, want %v", got, want)
		}
	}
}

// FuzzSafeLogLine: whatever line a plugin writes on stderr, the line
// handed to go-plugin either is not a JSON object or has string @message
// and @level (go-plugin type-asserts them: anything else panicked the
// host) and no @timestamp go-plugin cannot parse; a line needing no change
// is passed through unchanged.
func FuzzSafeLogLine(f *testing.F) {
	for _, s := range []string{"", "plain text", `{"@message": 5}`, `{"@level": ["x"], "@message": "m"}`,
		`{"@message": "m", "@level": "info", "@timestamp": "2026-01-02T03:04:05.678Z"}`,
		`{"@message": "m", "@level": "info", "@timestamp": "2026-01-02T03:04:05.678000Z"}`,
		`{"@timestamp": 7}`, `null`, `[1, 2]`, ` {"@message": null}`, `{"a": {"@message": 1}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		out := safeLogLine(line)
		var m map[string]any
		if json.Unmarshal([]byte(out), &m) != nil || m == nil {
			if out != line {
				t.Fatalf("a line that is not a JSON object changed: %q -> %q", line, out)
			}
			return
		}
		changed := false
		for _, k := range []string{"@message", "@level"} {
			if v, ok := m[k]; ok {
				if _, isStr := v.(string); !isStr {
					t.Fatalf("%q -> %q: %s is %T", line, out, k, v)
				}
			}
		}
		if v, ok := m["@timestamp"]; ok {
			s, isStr := v.(string)
			if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", s); !isStr || err != nil {
				t.Fatalf("%q -> %q: @timestamp %v go-plugin cannot parse", line, out, v)
			}
		}
		var orig map[string]any
		if json.Unmarshal([]byte(line), &orig) == nil && orig != nil {
			for _, k := range []string{"@message", "@level"} {
				if v, ok := orig[k]; ok {
					if _, isStr := v.(string); !isStr {
						changed = true
					}
				}
			}
			if v, ok := orig["@timestamp"]; ok {
				s, isStr := v.(string)
				if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", s); !isStr || err != nil {
					changed = true
				}
			}
		}
		if !changed && out != line {
			t.Fatalf("a line needing no change changed: %q -> %q", line, out)
		}
	})
}
