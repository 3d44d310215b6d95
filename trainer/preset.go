package trainer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
)

// Presets are the values of the top-level config key `preset`.
var Presets = []string{"none", "paper"}

// PaperStairs is the paper's staircase for the PPL bonus weight: 1 for the
// first half of training, 0 after (the paper's schedule ablation: strong
// exploration early, then the bonus removed abruptly). The paper draws the
// schedule without giving the step; half is our reading, and what
// bench/paper-countdown.yaml uses.
var PaperStairs = [][]any{{0.0, 1.0}, {0.5, 0.0}}

// paperMultiheadZeta is the paper's sub-sample fraction zeta for a K-head
// critic (the appendix's training-details table (b)): 1 for 2 and 4 heads, 0.5 for 8 and
// 16. Between 5 and 7 the paper is silent; 0.5, the value of the larger K.
func paperMultiheadZeta(heads int) float64 {
	if heads <= 4 {
		return 1
	}
	return 0.5
}

// applyPreset fills raw, the merged config tree, with the values of the
// preset it names (`preset:`, none by default), for every key the user did
// not set: userSet holds the dotted key paths the file, the layers, the
// environment and the flags set. A strategy entry is the user's: the
// preset fills only the keys that entry lacks. It returns the keys it set
// (sorted as applied), for the run's log.
//
// The `paper` preset is the seed paper's own settings where cde's
// defaults differ (docs/config.md, "The paper preset"):
//   - train.loss_agg_mode: seq-mean-token-mean (the paper's GRPO and PPO
//     objectives average each response's token losses, then the responses;
//     cde's default is verl's token-mean);
//   - train.critic_warmup: 10 with algorithm ppo (training-details table
//     (a); default 0);
//   - ppl: weight staircase 1 then 0 at half of training (table (b); the
//     strategy's default is constant 1);
//   - multihead: zeta 1 for K <= 4 heads, 0.5 above (table (b); the
//     strategy's default is 1 for every K).
//
// kappa, alpha and the multihead weight already default to the paper's
// (3 and 1 for ppl; 3, 0.5 and constant 1 for multihead).
func applyPreset(raw map[string]any, userSet map[string]bool) ([]string, error) {
	name := "none"
	if v, ok := raw["preset"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr {
			return nil, fmt.Errorf("config: preset: want one of %s, got %v", strings.Join(Presets, ", "), v)
		}
		name = s
	}
	switch name {
	case "none":
		return nil, nil
	case "paper":
	default:
		return nil, fmt.Errorf("config: preset: want one of %s, got %q", strings.Join(Presets, ", "), name)
	}
	isSet := func(key string) bool {
		for k := key; ; {
			if userSet[k] {
				return true
			}
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				return false
			}
			k = k[:i]
		}
	}
	var set []string
	train, _ := raw["train"].(map[string]any)
	if train == nil {
		train = map[string]any{}
		raw["train"] = train
	}
	if !isSet("train.loss_agg_mode") {
		train["loss_agg_mode"] = core.AggSeqMeanTokenMean
		set = append(set, "train.loss_agg_mode")
	}
	algo, _ := raw["algorithm"].(map[string]any)
	if criticAlgorithm(algo) && !isSet("train.critic_warmup") {
		train["critic_warmup"] = 10
		set = append(set, "train.critic_warmup")
	}
	list, _ := raw["strategies"].([]any)
	for i, item := range list {
		e, ok := item.(map[string]any)
		if !ok {
			continue // decodeConfig reports it
		}
		switch e["name"] {
		case "ppl":
			if _, has := e["weight"]; !has {
				e["weight"] = map[string]any{"schedule": "staircase", "w0": 1.0, "stairs": anyStairs(PaperStairs)}
				set = append(set, fmt.Sprintf("strategies[%d].weight", i))
			}
		case "multihead":
			if _, has := e["zeta"]; !has {
				heads := 4 // multihead's default K
				if h, ok := core.ToFloat(e["heads"]); ok {
					heads = int(h)
				}
				e["zeta"] = paperMultiheadZeta(heads)
				set = append(set, fmt.Sprintf("strategies[%d].zeta", i))
			}
		}
	}
	return set, nil
}

func anyStairs(st [][]any) []any {
	out := make([]any, len(st))
	for i, s := range st {
		out[i] = append([]any(nil), s...)
	}
	return out
}

// criticAlgorithm reports whether the algorithm entry names a registered
// algorithm that trains a critic (the paper's critic warm-up applies to
// it). An unknown name or bad keys report false: decodeConfig names them.
func criticAlgorithm(entry map[string]any) bool {
	name, _ := entry["name"].(string)
	if !slices.Contains(core.Algorithms(), name) {
		return false
	}
	params := map[string]any{}
	for k, v := range entry {
		if k != "name" {
			params[k] = v
		}
	}
	a, err := core.NewAlgorithm(name, core.NewParams("algorithm", params))
	return err == nil && a.NeedsCritic()
}
