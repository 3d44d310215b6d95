package trainer

import (
	"bufio"
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

// openMetrics opens RUN/metrics.jsonl for appending, first dropping any
// line of a step >= start (written after the checkpoint being resumed), so
// no step appears twice.
//
// Unless the trainer already knows train/generated_responses_total at
// start (a checkpoint that recorded it was restored), it rebuilds it from
// the lines kept: a step's train/generated_responses, or for a line
// written before that metric existed (1 + train/extra_batches) x
// prompts_per_step x rollout.n, the responses its batches held; a step
// without a line counts one batch.
func (t *Trainer) openMetrics(start int) error {
	path := filepath.Join(t.RunDir, "metrics.jsonl")
	var keep []string
	batch := float64(t.Cfg.Train.PromptsPerStep * t.Cfg.Rollout.N)
	perStep := map[int]float64{}
	if data, err := os.ReadFile(path); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			var row struct {
				Step      *int
				Generated *float64 `json:"train/generated_responses"`
				Extra     *float64 `json:"train/extra_batches"`
			}
			if json.Unmarshal(sc.Bytes(), &row) != nil || row.Step == nil {
				continue // a torn last line from a crash
			}
			if *row.Step < start {
				keep = append(keep, sc.Text())
				switch {
				case row.Generated != nil:
					perStep[*row.Step] = *row.Generated
				case row.Extra != nil:
					perStep[*row.Step] = (1 + *row.Extra) * batch
				}
			}
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
	content := ""
	if len(keep) > 0 {
		content = strings.Join(keep, "\n") + "\n"
	}
	if err := core.WriteFileAtomic(path, []byte(content)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	t.metrics = f
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
