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

// AlgorithmNeeds is implemented by an algorithm that needs more of a run
// than a critic (NeedsCritic): the signals and the run shape a strategy's
// Needs can declare, such as the verifier's verdicts (Needs.Correct) or a
// least group size (Needs.MinGroup). RunNeeds merges them with the
// strategies', so no caller special-cases an algorithm by name.
type AlgorithmNeeds interface {
	Needs() Needs
}

// RewardLevels is implemented by a verifier whose reward has two levels:
// Rewards returns the reward of an incorrect and of a correct answer (the
// task's incorrect_reward and correct_reward).
type RewardLevels interface {
	Rewards() (incorrect, correct float64)
}

// RewardLevelsUser is implemented by an algorithm that needs the task's
// two reward levels (maxrl); the run calls UseRewardLevels once, before
// the first step, when the task's verifier has them (RewardLevels).
type RewardLevelsUser interface {
	UseRewardLevels(incorrect, correct float64) error
}
