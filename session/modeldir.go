package session

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla/safetensors"
)

// ModelDir is the Hugging Face model directory that cde-run score and
// generate read: model itself, or the checkpoint of run (step, or the
// newest complete one when step < 0) exported to a temporary directory in
// float32, so the weights are the checkpoint's exactly. done removes the
// temporary directory (a no-op for model). Exactly one of model and run is
// given; step applies to run only.
func ModelDir(model, run string, step int, log zerolog.Logger) (dir string, done func(), err error) {
	switch {
	case (model == "") == (run == ""):
		return "", nil, errors.New("give exactly one of --model DIR (a Hugging Face model directory) and --run DIR (a run that trained one)")
	case model != "" && step >= 0:
		return "", nil, errors.New("--step applies to --run")
	case model != "":
		return model, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "cde-run-model-")
	if err != nil {
		return "", nil, err
	}
	done = func() { os.RemoveAll(tmp) }
	dir = filepath.Join(tmp, "model")
	if err := ExportHF(run, step, dir, safetensors.F32, log); err != nil {
		done()
		return "", nil, err
	}
	return dir, done, nil
}
