package xla

import (
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"
)

func varData(t *testing.T, n *net, scopeAndName string) []float32 {
	t.Helper()
	for v := range n.ctx.IterVariables() {
		if v.Path() == scopeAndName {
			val, err := v.Value()
			if err != nil {
				t.Fatal(err)
			}
			return tensors.MustCopyFlatData[float32](val)
		}
	}
	t.Fatalf("no variable %s", scopeAndName)
	return nil
}

// After InitCriticFromPolicy every trunk variable of the critic equals the
// policy's, the value head is the one the critic was built with, and the
// critic's Adam state is zero.
func TestInitCriticFromPolicy(t *testing.T) {
	b := tinyBackend(t, 3)
	head := varData(t, b.critic, "/value/w")
	var trunk []string
	for _, v := range b.critic.trainable() {
		if !strings.HasPrefix(v.Scope(), "/value") {
			trunk = append(trunk, v.Path())
		}
	}
	if len(trunk) == 0 {
		t.Fatal("the critic has no trunk variables")
	}
	// Built from different seeds, the two trunks differ before the copy.
	if slices.Equal(varData(t, b.critic, "/embed/tokens"), varData(t, b.policy, "/embed/tokens")) {
		t.Fatal("critic and policy embeddings already equal")
	}
	for v := range b.critic.ctx.IterVariables() {
		if strings.HasPrefix(v.Scope(), "/adam") {
			if err := v.SetValue(tensors.FromFlatDataAndDimensions(slices.Repeat([]float32{1}, v.Shape().Size()), v.Shape().Dimensions...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.critic.adamStep = 5
	n, err := b.InitCriticFromPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if n != len(trunk) {
		t.Errorf("copied %d variables, the critic's trunk has %d", n, len(trunk))
	}
	for _, name := range trunk {
		if !slices.Equal(varData(t, b.critic, name), varData(t, b.policy, name)) {
			t.Errorf("%s differs from the policy's after the copy", name)
		}
	}
	if !slices.Equal(varData(t, b.critic, "/value/w"), head) {
		t.Error("the value head changed")
	}
	for v := range b.critic.ctx.IterVariables() {
		if strings.HasPrefix(v.Scope(), "/adam") {
			for i, x := range varData(t, b.critic, v.Path()) {
				if x != 0 {
					t.Fatalf("%s[%d] = %v after the copy, want 0", v.Path(), i, x)
				}
			}
		}
	}
	if b.critic.adamStep != 0 {
		t.Errorf("critic Adam step %d, want 0", b.critic.adamStep)
	}
	if _, err := tinyBackend(t, 0).InitCriticFromPolicy(); err == nil || !strings.Contains(err.Error(), "no critic") {
		t.Errorf("without a critic: %v", err)
	}
}
