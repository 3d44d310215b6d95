package trainer

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A run whose actor updates all have a zero gradient says that nothing
// moved: after stillSteps of them, and at the end of a shorter run. A run
// with gradients says nothing; one whose gradient vanishes later warns that
// the policy stopped moving.
func TestWarnsWhenNothingMoves(t *testing.T) {
	cases := []struct {
		name  string
		steps int
		norm  func(u int) float64
		want  string // "" for no warning
	}{
		{"moving", 12, func(int) float64 { return 0.5 }, ""},
		{"never, long", 12, func(int) float64 { return 0 }, "no parameter has moved"},
		{"never, short", 3, func(int) float64 { return 0 }, "no parameter has moved"},
		{"stops later", 14, func(u int) float64 {
			if u <= 2 {
				return 1
			}
			return 0
		}, "the policy is not moving"},
		{"zero streak too short", 12, func(u int) float64 {
			if u%5 == 0 {
				return 1
			}
			return 0
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fakeConfig(t, tc.steps, 1)
			be := &fakeBackend{gradNorm: tc.norm}
			tr := fakeTrainer(t, cfg, be)
			var buf bytes.Buffer
			tr.Log = zerolog.New(&buf)
			if err := tr.Run(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if tc.want == "" {
				if strings.Contains(got, "moved") || strings.Contains(got, "not moving") {
					t.Fatalf("warned although the policy moved:\n%s", got)
				}
				return
			}
			if n := strings.Count(got, tc.want); n != 1 {
				t.Fatalf("%q logged %d times, want once:\n%s", tc.want, n, got)
			}
		})
	}
}
