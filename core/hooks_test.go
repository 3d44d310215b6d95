package core

import (
	"errors"
	"reflect"
	"testing"
)

// A strategy with every hook as a method.
type allHooks struct{ after bool }

func (allHooks) Name() string { return "all" }
func (allHooks) Needs() Needs { return Needs{} }
func (allHooks) RewardBonus(StepInfo, *Rollout) ([]float64, error) {
	return []float64{1}, nil
}
func (allHooks) AdvantageBonus(StepInfo, *Rollout) ([][]float64, error) {
	return [][]float64{{2}}, nil
}
func (a allHooks) AfterFinalize() bool                 { return a.after }
func (allHooks) LossTerms(StepInfo) (LossTerms, error) { return LossTerms{EntropyCoef: 3}, nil }
func (allHooks) TokenLoss(StepInfo, *Rollout) (TokenLoss, error) {
	return TokenLoss{EntropyCoef: 4}, nil
}
func (allHooks) HeadMasks(StepInfo, *Rollout) ([][]float64, error) { return nil, nil }
func (allHooks) Observe(StepInfo, *Rollout) (map[string]float64, error) {
	return map[string]float64{"x": 5}, nil
}
func (allHooks) SaveState() ([]byte, error) { return []byte("s"), nil }
func (allHooks) LoadState([]byte) error     { return nil }
func (allHooks) CellCounts() []int          { return []int{6} }
func (allHooks) Close() error               { return errors.New("closed") }
func (allHooks) Unweighted()                {}

// A strategy with no hook.
type noHooks struct{}

func (noHooks) Name() string { return "none" }
func (noHooks) Needs() Needs { return Needs{} }

// A wrapper: it has allHooks' methods, but says it only adds a reward
// bonus (HookProvider wins over the methods).
type onlyReward struct{ allHooks }

func (onlyReward) Hooks() Hooks {
	return Hooks{RewardBonus: func(StepInfo, *Rollout) ([]float64, error) { return []float64{7}, nil }}
}

func TestHooksOf(t *testing.T) {
	all := []string{"reward_bonus", "advantage_bonus", "loss_terms", "token_loss", "head_masks", "observe", "state", "cell_counts", "close"}
	for _, tc := range []struct {
		s          Strategy
		names      []string
		after      bool
		unweighted bool
	}{
		{allHooks{}, all, false, true},
		{allHooks{after: true}, all, true, true},
		{noHooks{}, nil, false, false},
		{onlyReward{}, []string{"reward_bonus"}, false, false},
	} {
		h := HooksOf(tc.s)
		if got := hookNames(h); !reflect.DeepEqual(got, tc.names) {
			t.Errorf("%T: hooks %v, want %v", tc.s, got, tc.names)
		}
		if h.AfterFinalize != tc.after || h.Unweighted != tc.unweighted {
			t.Errorf("%T: after %v unweighted %v, want %v %v", tc.s, h.AfterFinalize, h.Unweighted, tc.after, tc.unweighted)
		}
		if err := h.Check(); err != nil {
			t.Errorf("%T: %v", tc.s, err)
		}
	}
	// The functions are the methods (or the provider's).
	h := HooksOf(allHooks{})
	if b, _ := h.RewardBonus(StepInfo{}, nil); b[0] != 1 {
		t.Errorf("RewardBonus gave %v", b)
	}
	if lt, _ := h.LossTerms(StepInfo{}); lt.EntropyCoef != 3 {
		t.Errorf("LossTerms gave %v", lt)
	}
	if c := h.CellCounts(); c[0] != 6 {
		t.Errorf("CellCounts gave %v", c)
	}
	if b, _ := HooksOf(onlyReward{}).RewardBonus(StepInfo{}, nil); b[0] != 7 {
		t.Errorf("the provider's RewardBonus gave %v", b)
	}
}

func TestHooksCheck(t *testing.T) {
	save := func() ([]byte, error) { return nil, nil }
	adv := func(StepInfo, *Rollout) ([][]float64, error) { return nil, nil }
	for _, tc := range []struct {
		h    Hooks
		fail bool
	}{
		{Hooks{}, false},
		{Hooks{SaveState: save}, true},
		{Hooks{LoadState: func([]byte) error { return nil }}, true},
		{Hooks{AfterFinalize: true}, true},
		{Hooks{AfterFinalize: true, AdvantageBonus: adv}, false},
	} {
		if err := tc.h.Check(); (err != nil) != tc.fail {
			t.Errorf("%+v: Check() = %v, want failure %v", hookNames(tc.h), err, tc.fail)
		}
	}
}

func TestCloseAll(t *testing.T) {
	if err := CloseAll([]Strategy{noHooks{}, allHooks{}, onlyReward{}}); err == nil || err.Error() != "closed" {
		t.Errorf("CloseAll = %v, want allHooks' error", err)
	}
}

// hookNames lists the hooks h has, in the order of the fields, by the
// names the plugin protocol gives them ("reward_bonus", "advantage_bonus",
// "loss_terms", "token_loss", "head_masks", "observe", "state"), plus
// "cell_counts" and "close".
func hookNames(h Hooks) []string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{
		{h.RewardBonus != nil, "reward_bonus"},
		{h.AdvantageBonus != nil, "advantage_bonus"},
		{h.LossTerms != nil, "loss_terms"},
		{h.TokenLoss != nil, "token_loss"},
		{h.HeadMasks != nil, "head_masks"},
		{h.Observe != nil, "observe"},
		{h.SaveState != nil, "state"},
		{h.CellCounts != nil, "cell_counts"},
		{h.Close != nil, "close"},
	} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return out
}
