package trainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cde-rl/cde/core"
)

// UnreadableMetricsName is the file beside metrics.jsonl where a resume
// moves the lines of metrics.jsonl it cannot read as a row, byte for byte,
// so that rewriting metrics.jsonl never loses what the run did not write.
const UnreadableMetricsName = "metrics.jsonl.unreadable"

// maxBadWarnings is how many unreadable lines a resume warns about one by
// one.
const maxBadWarnings = 10

// metricsRow is one line of metrics.jsonl as a resume reads it.
type metricsRow struct {
	line int    // 1-based line number in the file
	text []byte // the line without its newline
	step int
	// generated is the step's responses as the row records them (see
	// openMetrics), -1 when it records neither metric.
	generated float64
}

// readMetricsRows reads metrics.jsonl: every line that is a JSON object
// with an integer "step" is a row; every other non-blank line is returned
// in bad with its line number and why. Lines of any length are read (no
// scanner limit). path must be a regular file (or absent: no rows): a
// named pipe or a device would block the read, or never end.
func readMetricsRows(path string, batch float64) (rows, bad []metricsRow, why []string, err error) {
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, nil, fmt.Errorf("%s is not a regular file (%s): a run's metrics.jsonl must be one; move it aside and resume again", path, fileKind(fi.Mode()))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	for n := 1; len(data) > 0; n++ {
		text := data
		torn := true
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			text, data, torn = data[:i], data[i+1:], false
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		var row struct {
			Step      *int
			Generated *float64 `json:"train/generated_responses"`
			Extra     *float64 `json:"train/extra_batches"`
		}
		if perr := json.Unmarshal(text, &row); perr != nil || row.Step == nil || *row.Step < 0 {
			reason := "not a JSON object"
			switch {
			case torn:
				reason = "a torn last line without its newline (a write cut off by a crash)"
			case perr == nil && row.Step == nil:
				reason = `a JSON object without "step"`
			case perr == nil:
				reason = fmt.Sprintf("a negative step %d", *row.Step)
			case len(text) > 0 && text[0] == '{':
				reason = "not valid JSON: " + perr.Error()
			}
			bad = append(bad, metricsRow{line: n, text: text})
			why = append(why, reason)
			continue
		}
		r := metricsRow{line: n, text: text, step: *row.Step, generated: -1}
		switch {
		case row.Generated != nil:
			r.generated = *row.Generated
		case row.Extra != nil:
			r.generated = (1 + *row.Extra) * batch
		}
		rows = append(rows, r)
	}
	return rows, bad, why, nil
}

// finishedRows reports whether metrics.jsonl holds the row of step total,
// which only the evaluation after the last step writes, and returns it
// with the row of step total-1 (nil when absent), values as written (null
// is NaN).
func (t *Trainer) finishedRows(total int) (final, last map[string]float64, done bool, err error) {
	path := filepath.Join(t.RunDir, "metrics.jsonl")
	rows, _, _, err := readMetricsRows(path, 0)
	if err != nil {
		return nil, nil, false, fmt.Errorf("resume: %w", err)
	}
	values := func(text []byte) (map[string]float64, error) {
		var raw map[string]*float64
		if err := json.Unmarshal(text, &raw); err != nil {
			return nil, err
		}
		m := map[string]float64{}
		for k, v := range raw {
			switch {
			case k == "step":
			case v == nil:
				m[k] = math.NaN()
			default:
				m[k] = *v
			}
		}
		return m, nil
	}
	for _, r := range rows {
		var err error
		switch r.step {
		case total:
			final, err = values(r.text)
			done = err == nil
		case total - 1:
			last, err = values(r.text)
		}
		if err != nil {
			return nil, nil, false, fmt.Errorf("resume: %s line %d: %w", path, r.line, err)
		}
	}
	return final, last, done, nil
}

// fileKind names a non-regular file's type for an error message.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}

// openMetrics opens RUN/metrics.jsonl for appending, first dropping any
// row of a step >= start (written by this run after the checkpoint being
// resumed), so no step appears twice. A line that is not a row (corrupt,
// torn, or not the trainer's) is never dropped: it is appended byte for
// byte to RUN/metrics.jsonl.unreadable, synced, before metrics.jsonl is
// rewritten, and a warning names its line number.
//
// Unless the trainer already knows train/generated_responses_total at
// start (a checkpoint that recorded it was restored), it rebuilds it from
// the rows kept: a step's train/generated_responses, or for a row written
// before that metric existed (1 + train/extra_batches) x prompts_per_step
// x rollout.n, the responses its batches held; a step without a row
// counts one batch.
func (t *Trainer) openMetrics(start int) error {
	path := filepath.Join(t.RunDir, "metrics.jsonl")
	batch := float64(t.Cfg.Train.PromptsPerStep * t.Cfg.Rollout.N)
	rows, bad, why, err := readMetricsRows(path, batch)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	var keep bytes.Buffer
	perStep := map[int]float64{}
	for _, r := range rows {
		if r.step < start {
			keep.Write(r.text)
			keep.WriteByte('\n')
			if r.generated >= 0 {
				perStep[r.step] = r.generated
			}
		}
	}
	if len(bad) > 0 {
		if err := t.setAsideMetrics(path, bad, why); err != nil {
			return err
		}
	}
	t.lastGenerated = 0
	if start > 0 {
		t.lastGenerated = int64(batch)
		if g, ok := perStep[start-1]; ok {
			t.lastGenerated = int64(g)
		}
	}
	if t.generatedAt != start || start == 0 {
		t.generated, t.generatedAt = 0, start
		for s := range start {
			if g, ok := perStep[s]; ok {
				t.generated += int64(g)
			} else {
				t.generated += int64(batch)
			}
		}
	}
	if err := core.WriteFileAtomic(path, keep.Bytes()); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	t.metrics = f
	return nil
}

// setAsideMetrics appends the unreadable lines to metrics.jsonl.unreadable
// (each with its newline) and syncs it, warning once per line for the
// first maxBadWarnings lines and once for the rest.
func (t *Trainer) setAsideMetrics(path string, bad []metricsRow, why []string) error {
	side := filepath.Join(filepath.Dir(path), UnreadableMetricsName)
	f, err := os.OpenFile(side, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("resume: setting aside unreadable lines of %s: %w", path, err)
	}
	var buf bytes.Buffer
	for _, b := range bad {
		buf.Write(b.text)
		buf.WriteByte('\n')
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("resume: setting aside unreadable lines of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("resume: setting aside unreadable lines of %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	for i, b := range bad {
		if i == maxBadWarnings {
			t.Log.Warn().Str("file", path).Int("lines", len(bad)-i).Str("moved_to", side).
				Msgf("%d more lines of metrics.jsonl are not metrics rows (the last is line %d): moved to %s", len(bad)-i, bad[len(bad)-1].line, UnreadableMetricsName)
			break
		}
		t.Log.Warn().Str("file", path).Int("line", b.line).Int("bytes", len(b.text)).Str("moved_to", side).
			Msgf("metrics.jsonl line %d is not a metrics row (%s): moved to %s", b.line, why[i], UnreadableMetricsName)
	}
	return nil
}

func (t *Trainer) writeMetrics(step int, m map[string]float64) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, `{"step":%d`, step)
	for _, k := range keys {
		v := m[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			fmt.Fprintf(&b, `,%q:null`, k)
			continue
		}
		fmt.Fprintf(&b, `,%q:%s`, k, jsonFloat(v))
	}
	b.WriteString("}\n")
	if _, err := t.metrics.WriteString(b.String()); err != nil {
		return err
	}
	if t.tb != nil {
		if err := t.tb.Scalars(step, time.Now(), m); err != nil {
			return fmt.Errorf("train.logger tensorboard: %w", err)
		}
	}
	return nil
}

func jsonFloat(v float64) string {
	out, _ := json.Marshal(v)
	return string(out)
}
