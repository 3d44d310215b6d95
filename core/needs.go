package core

import "fmt"

// RunNeeds is what a run's algorithm and strategies declare they read,
// merged in one place: one critic head when the algorithm needs a critic
// (the trainer raises it to train.value_heads), the algorithm's own needs
// (AlgorithmNeeds), then each strategy's in config order. Two strategies
// asking for different poolings are an error naming the second. The
// trainer adds what it always computes (log-probs and entropies); `cde-run
// shape` checks a rollout file against the declared needs alone.
func RunNeeds(algo Algorithm, strategies []Strategy) (Needs, error) {
	var n Needs
	if algo != nil {
		if algo.NeedsCritic() {
			n.ValueHeads = 1
		}
		if a, ok := algo.(AlgorithmNeeds); ok {
			n, _ = n.Merge(a.Needs())
		}
	}
	for i, s := range strategies {
		var ok bool
		if n, ok = n.Merge(s.Needs()); !ok {
			return n, fmt.Errorf("config: strategies[%d] (%s): asks for pooling %q but another strategy asked for %q", i, s.Name(), s.Needs().Pooling, n.Pooling)
		}
	}
	return n, nil
}

// CheckGroupSize reports a rollout.n below MinGroup, naming both keys.
func (n Needs) CheckGroupSize(rolloutN int) error {
	if n.MinGroup > rolloutN {
		return fmt.Errorf("config: rollout.n = %d is less than %s = %d: every group of rollout.n responses must hold at least that many (raise rollout.n or lower %s)",
			rolloutN, n.MinGroupKey, n.MinGroup, n.MinGroupKey)
	}
	return nil
}
