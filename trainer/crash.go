package trainer

import (
	"fmt"
	"os"
)

// Crash points let tests kill a run at a chosen instant of a checkpoint
// write and check what a resume then finds. CDE_TEST_KILL_AT=POINT:STEP in
// the environment makes the process SIGKILL itself when it reaches POINT
// while writing the checkpoint of STEP (points: checkpoint.files,
// checkpoint.manifest, checkpoint.exchanged, checkpoint.moved-aside,
// checkpoint.installed, checkpoint.latest), or at the start of step STEP
// of a warm start (pretrain.step). Unit tests set crashHook.
var (
	killAt    = os.Getenv("CDE_TEST_KILL_AT")
	crashHook func(point string, step int)
	// exchange selects the atomic directory exchange when replacing a
	// checkpoint (tests turn it off to cover the move-aside path).
	exchange = true
)

func crashPoint(point string, step int) {
	if crashHook != nil {
		crashHook(point, step)
	}
	if killAt != "" && killAt == fmt.Sprintf("%s:%d", point, step) {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill() // SIGKILL on Unix: nothing runs after this
		}
		select {}
	}
}
