package core

import "fmt"

// Hooks is what a strategy does: one function per hook, nil where the
// strategy has no such hook. Callers ask a strategy once, with HooksOf, and
// call the functions; nothing else in cde asserts the optional hook
// interfaces.
//
// A strategy written in Go implements the optional interfaces (RewardHook,
// AdvantageHook, ...) as methods and HooksOf finds them. A strategy whose
// hooks are known only at run time (a plugin, a wrapper) implements
// HookProvider instead and returns its Hooks directly.
type Hooks struct {
	// RewardBonus is RewardHook.RewardBonus.
	RewardBonus func(info StepInfo, r *Rollout) ([]float64, error)
	// AdvantageBonus is AdvantageHook.AdvantageBonus.
	AdvantageBonus func(info StepInfo, r *Rollout) ([][]float64, error)
	// AfterFinalize places AdvantageBonus after the algorithm's Finalize
	// (AfterFinalizer answering true).
	AfterFinalize bool
	// LossTerms is LossHook.LossTerms.
	LossTerms func(info StepInfo) (LossTerms, error)
	// TokenLoss is TokenLossHook.TokenLoss.
	TokenLoss func(info StepInfo, r *Rollout) (TokenLoss, error)
	// HeadMasks is HeadMasker.HeadMasks.
	HeadMasks func(info StepInfo, r *Rollout) ([][]float64, error)
	// Observe is Observer.Observe.
	Observe func(info StepInfo, r *Rollout) (map[string]float64, error)
	// SaveState and LoadState are Stateful's; both or neither.
	SaveState func() ([]byte, error)
	LoadState func(data []byte) error
	// CellCounts is CellCounter.CellCounts.
	CellCounts func() []int
	// Close is Closer.Close.
	Close func() error
	// Unweighted refuses a `weight:` on the strategy's entry (Unweighted).
	Unweighted bool
}

// HookProvider is implemented by a strategy that states its hooks as a
// value instead of as methods: a plugin, whose hooks are the ones its
// process declared, or a wrapper that changes what the strategy it wraps
// does. HooksOf returns Hooks() as it is, without looking for methods.
type HookProvider interface {
	Hooks() Hooks
}

// HooksOf returns what s does. A HookProvider answers for itself; any other
// strategy's hooks are its methods of the optional hook interfaces.
func HooksOf(s Strategy) Hooks {
	if p, ok := s.(HookProvider); ok {
		return p.Hooks()
	}
	var h Hooks
	if x, ok := s.(RewardHook); ok {
		h.RewardBonus = x.RewardBonus
	}
	if x, ok := s.(AdvantageHook); ok {
		h.AdvantageBonus = x.AdvantageBonus
		if a, ok := s.(AfterFinalizer); ok {
			h.AfterFinalize = a.AfterFinalize()
		}
	}
	if x, ok := s.(LossHook); ok {
		h.LossTerms = x.LossTerms
	}
	if x, ok := s.(TokenLossHook); ok {
		h.TokenLoss = x.TokenLoss
	}
	if x, ok := s.(HeadMasker); ok {
		h.HeadMasks = x.HeadMasks
	}
	if x, ok := s.(Observer); ok {
		h.Observe = x.Observe
	}
	if x, ok := s.(Stateful); ok {
		h.SaveState, h.LoadState = x.SaveState, x.LoadState
	}
	if x, ok := s.(CellCounter); ok {
		h.CellCounts = x.CellCounts
	}
	if x, ok := s.(Closer); ok {
		h.Close = x.Close
	}
	_, h.Unweighted = s.(Unweighted)
	return h
}

// Check reports a Hooks value no strategy could mean: state saved but not
// loaded (or loaded but not saved), or AfterFinalize without an advantage
// bonus to place.
func (h Hooks) Check() error {
	if (h.SaveState == nil) != (h.LoadState == nil) {
		return fmt.Errorf("hooks: SaveState and LoadState come together (one is nil)")
	}
	if h.AfterFinalize && h.AdvantageBonus == nil {
		return fmt.Errorf("hooks: AfterFinalize is set without an AdvantageBonus")
	}
	return nil
}

// CloseAll closes every strategy of ss that has a Close hook (plugin
// processes), in order, and returns the first error.
func CloseAll(ss []Strategy) error {
	var first error
	for _, s := range ss {
		if c := HooksOf(s).Close; c != nil {
			if err := c(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
