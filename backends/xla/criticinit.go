package xla

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

// InitCriticFromPolicy sets the critic's trunk to the policy's current
// weights: every critic variable that the policy also has, under the same
// scope and name with the same shape (the embeddings, every layer, the
// final norm), takes the policy's value; the value head, which the policy
// lacks, keeps its fresh initialisation. The Adam moments of the copied
// variables are zeroed and the critic's Adam step count reset, as for a
// freshly built critic. This is verl's practice of starting the critic
// from the policy's model (the paper's setup: critic and actor from the
// same checkpoint, then a critic warm-up), for a policy that has moved
// away from its initial weights, such as a supervised base.
//
// It returns the number of variables copied; it is an error when there is
// no critic or when no variable matched (the two nets share nothing).
func (b *Backend) InitCriticFromPolicy() (int, error) {
	if b.critic == nil {
		return 0, errors.New("init critic from policy: the run has no critic (value_heads 0)")
	}
	pol := map[string]*model.Variable{}
	for v := range b.policy.ctx.IterVariables() {
		pol[v.Path()] = v
	}
	type pair struct{ dst, src *model.Variable }
	var copies []pair
	for _, v := range b.critic.trainable() {
		src, ok := pol[v.Path()]
		if !ok {
			continue
		}
		if !slices.Equal(src.Shape().Dimensions, v.Shape().Dimensions) {
			return 0, fmt.Errorf("init critic from policy: %s has shape %v in the critic, %v in the policy", v.Path(), v.Shape().Dimensions, src.Shape().Dimensions)
		}
		copies = append(copies, pair{v, src})
	}
	if len(copies) == 0 {
		return 0, errors.New("init critic from policy: no variable of the critic is in the policy")
	}
	for _, c := range copies {
		val, err := c.src.Value()
		if err != nil {
			return 0, err
		}
		data := tensors.MustCopyFlatData[float32](val)
		if err := c.dst.SetValue(tensors.FromFlatDataAndDimensions(data, val.Shape().Dimensions...)); err != nil {
			return 0, err
		}
	}
	for v := range b.critic.ctx.IterVariables() {
		if err := zeroIfAdam(v); err != nil {
			return 0, err
		}
	}
	b.critic.adamStep = 0
	return len(copies), nil
}

// HasCritic reports whether the backend was built with a critic.
func (b *Backend) HasCritic() bool { return b.critic != nil }

// zeroIfAdam zeroes v when it is an Adam moment (scope /adam/...).
func zeroIfAdam(v *model.Variable) error {
	if len(v.Scope()) < 5 || v.Scope()[:5] != "/adam" {
		return nil
	}
	return v.SetValue(tensors.FromShape(v.Shape()))
}
