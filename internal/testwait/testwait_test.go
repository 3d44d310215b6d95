package testwait

import (
	"testing"
	"time"
)

func TestFactor(t *testing.T) {
	for _, c := range []struct {
		load float64
		cpus int
		env  string
		want float64
	}{
		{0.5, 2, "", 1},    // quiet: unchanged
		{2, 2, "", 1},      // one runnable task per core: unchanged
		{6, 2, "", 3},      // load 6 on 2 cores: 3x
		{40, 2, "", 10},    // capped at 10
		{6, 2, "2", 6},     // times the variable
		{0, 0, "1.5", 1.5}, // no load figure: the variable alone
		{6, 2, "x", 3},     // unparsable variable ignored
		{6, 2, "-1", 3},    // so is a non-positive one
	} {
		if got := Factor(c.load, c.cpus, c.env); got != c.want {
			t.Errorf("Factor(%v, %d, %q) = %v, want %v", c.load, c.cpus, c.env, got, c.want)
		}
	}
	if d := Scale(time.Second); d < time.Second || d > 100*time.Second {
		t.Errorf("Scale(1s) = %v", d)
	}
}
