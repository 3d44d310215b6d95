package core

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkReadRolloutScale reads rollout files of 100, 1k and 10k
// sequences of 64 tokens: the time per token should stay flat (the reader
// is linear in its input; issue 33 asked for it to be shown).
//
//	go test ./core -run '^$' -bench ReadRolloutScale -benchtime 3x
func BenchmarkReadRolloutScale(b *testing.B) {
	seq := `{"group": 3, "reward": 1, "logprobs": [` + strings.TrimSuffix(strings.Repeat("-0.5, ", 64), ", ") +
		`], "values": [` + strings.TrimSuffix(strings.Repeat("[0.1, 0.2], ", 64), ", ") + `]}`
	for _, n := range []int{100, 1000, 10000} {
		data := []byte(`{"step": 1, "total_steps": 4, "sequences": [` + strings.TrimSuffix(strings.Repeat(seq+", ", n), ", ") + `]}`)
		b.Run(fmt.Sprintf("seqs=%d", n), func(b *testing.B) {
			for b.Loop() {
				r, err := ReadRollout(bytes.NewReader(data), "f.json")
				if err != nil || len(r.Seqs) != n {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*64), "ns/token")
		})
	}
}
