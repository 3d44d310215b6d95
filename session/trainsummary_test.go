package session

import (
	"strings"
	"testing"
	"time"

	"github.com/cde-rl/cde/trainer"
)

// train's closing table shows the strategies' explore/* metrics of the
// last step beside its rewards (other per-step metrics stay in the file).
func TestTrainSummaryExploreMetrics(t *testing.T) {
	tr := &trainer.Trainer{Final: map[string]float64{"eval/acc": 0.5},
		LastStep: map[string]float64{"reward/acc": 0.25, "explore/ppl/bonus_mean": 0.0125, "actor/pg_loss": 3}}
	var b strings.Builder
	writeTrainSummary(&b, "runs/x", 0, 4, time.Second, tr)
	out := b.String()
	for _, want := range []string{"explore/ppl/bonus_mean", "reward/acc", "eval/acc", "reward/* and explore/* of step 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "actor/pg_loss") {
		t.Errorf("actor/pg_loss in the table:\n%s", out)
	}
}
