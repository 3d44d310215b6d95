package core

import (
	"fmt"
	"math"
)

// Generator samples responses for the trainer. The Backend is one
// (in-process generation, Trainer.Gen nil); package rollout's client of
// OpenAI-compatible completions servers (vLLM, SGLang, `cde-run serve`) is
// the other. A remote Generator returns the servers' log-probs in
// Generation.LogProbs (NaN where a server gave none) and no entropies or
// embeddings: the trainer recomputes those with its own weights (Rescorer).
type Generator interface {
	Generate(req GenerateRequest) ([]Generation, error)
}

// Rescorer is the Backend capability the trainer needs after remote
// generation: each sequence's per-token log-probs and entropies under the
// trainer's current policy at temperature temp (the old log-probs of the
// actor loss). backends/xla's Backend has it.
type Rescorer interface {
	ScoreLogProbs(seqs []*Sequence, temp float64) (lps, ents [][]float64, err error)
}

// EmbeddingRescorer is Rescorer with each sequence's pooled last-layer
// state (Needs.Pooling: "last", "second_last" or "mean"), which strategies
// such as simhash read, when the responses were generated remotely.
// backends/xla's Backend has it.
type EmbeddingRescorer interface {
	RescoreWithEmbeddings(seqs []*Sequence, temp float64, pooling string) (lps, ents, embs [][]float64, err error)
}

// ServerGenerator is a Generator backed by servers that hold their own copy
// of the policy (package rollout). The trainer calls SyncWeights after an
// actor update (rollout.weight_sync) and reports LiveServers as
// rollout/servers_live.
type ServerGenerator interface {
	Generator
	// SyncWeights writes the trainer's policy where the servers read it
	// and has every live server reload it; a server that fails is dropped.
	SyncWeights() error
	// LiveServers is the number of servers not dropped.
	LiveServers() int
}

// CheckRemoteNeeds refuses remote generation when a strategy needs pooled
// last-layer states (Needs.Pooling, e.g. simhash) and the backend cannot
// recompute them (EmbeddingRescorer): the servers return none.
func CheckRemoteNeeds(strategies []Strategy, b Backend) error {
	if _, ok := b.(EmbeddingRescorer); ok {
		return nil
	}
	for i, s := range strategies {
		if p := s.Needs().Pooling; p != "" {
			return fmt.Errorf("config: rollout.servers and strategies[%d] (%s): the strategy needs pooled last-layer states (pooling %s), which remote servers do not return and the backend (%s) cannot recompute (core.EmbeddingRescorer); generate in-process (rollout.servers: []) or drop the strategy",
				i, s.Name(), p, b.Engine())
		}
	}
	return nil
}

// TISWeights computes truncated importance-sampling weights for a batch
// generated remotely: per token, w = min(exp(old - rollout), capC) with old
// = Sequence.LogProbs (the trainer's recomputation, pi_old) and rollout =
// Sequence.RolloutLogProbs (the server's, pi_rollout); w = 1 where the
// rollout log-prob is unknown (NaN). The weight is a constant of the loss
// (no gradient) multiplying the token's policy-gradient term, so the update
// follows pi_old's gradient from pi_rollout's samples, with the variance
// bounded by the cap. This is the truncation of verl's rollout importance
// sampling (its token-level "truncate" mode) and of OpenRLHF's TIS
// (Yao et al. 2025, "Your efficient RL framework secretly brings you
// off-policy RL training"). capC <= 0 returns nil weights and only the
// mismatch metrics.
//
// It returns the weights (one row per sequence, nil when capC <= 0) and
// adds to m: rollout/logprob_abs_diff, the mean |old - rollout| over tokens
// with a known rollout log-prob, and with capC > 0 rollout/tis_weight_mean
// (over all tokens) and rollout/tis_clipfrac (the fraction of tokens whose
// exp(old - rollout) exceeded capC).
func TISWeights(r *Rollout, capC float64, m map[string]float64) ([][]float64, error) {
	var weights [][]float64
	if capC > 0 {
		weights = make([][]float64, len(r.Seqs))
	}
	var diff, wsum, clipped float64
	known, n := 0, 0
	for i := range r.Seqs {
		s := &r.Seqs[i]
		if len(s.RolloutLogProbs) != len(s.LogProbs) {
			return nil, fmt.Errorf("rollout: sequence %d: %d rollout log-probs for %d tokens", i, len(s.RolloutLogProbs), len(s.LogProbs))
		}
		var row []float64
		if capC > 0 {
			row = make([]float64, len(s.LogProbs))
		}
		for t, old := range s.LogProbs {
			n++
			ro := s.RolloutLogProbs[t]
			w := 1.0
			if !math.IsNaN(ro) {
				diff += math.Abs(old - ro)
				known++
				// The log-ratio is clamped as the actor's ratios are, so a
				// wild server log-prob cannot overflow exp.
				lr, _ := ClampLogRatio(old - ro)
				w = math.Exp(lr)
			}
			if capC > 0 {
				if w > capC {
					w = capC
					clipped++
				}
				row[t] = w
				wsum += w
			}
		}
		if capC > 0 {
			weights[i] = row
		}
	}
	if known > 0 {
		m["rollout/logprob_abs_diff"] = diff / float64(known)
	}
	if capC > 0 && n > 0 {
		m["rollout/tis_weight_mean"] = wsum / float64(n)
		m["rollout/tis_clipfrac"] = clipped / float64(n)
	}
	return weights, nil
}
