package session_test

import (
	"context"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/session"
	"github.com/cde-rl/cde/trainer"
)

// Train GRPO with the perplexity bonus from Go code, without the CLI (the
// README shows this example).
func Example() {
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Sets: []string{
		"train.steps=50",
		"strategies=[{name: ppl, weight: {schedule: staircase, w0: 1, stairs: [[0, 1], [0.5, 0]]}}]",
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = session.Train(context.Background(), session.TrainOptions{
		Config: cfg,
		RunDir: "runs/ppl-from-go",
		Output: session.Output{W: os.Stderr},
		Log:    zerolog.New(os.Stderr),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
