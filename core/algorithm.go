package core

// Algorithm turns shaped rewards into per-token advantages and returns.
type Algorithm interface {
	Name() string
	// NeedsCritic reports whether the algorithm reads Sequence.Values.
	NeedsCritic() bool
	// Advantages sets Advantages and Returns of every sequence from
	// ShapedReward (and Values for critic algorithms): the raw advantages,
	// before strategy bonuses.
	Advantages(r *Rollout) error
	// Finalize runs after the strategies' advantage bonuses were added
	// (PPO's batch whitening); it may be a no-op.
	Finalize(r *Rollout) error
}
