package trainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// finishedRun trains a fake run of 5 steps with checkpoints every 2 (and
// at 5) and returns its trainer and the metrics.jsonl it wrote.
func finishedRun(t *testing.T) (*Trainer, []byte) {
	t.Helper()
	cfg := fakeConfig(t, 5, 2)
	tr := fakeTrainer(t, cfg, &fakeBackend{})
	if err := tr.Run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tr.RunDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if got := metricSteps(t, tr.RunDir); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("steps %v", got)
	}
	return tr, data
}

// resumeFrom restores runDir's checkpoint of step ck in a new trainer with
// a log into buf and runs it to the end.
func resumeFrom(t *testing.T, runDir string, ck int, buf *bytes.Buffer) (*Trainer, error) {
	t.Helper()
	tr := fakeTrainer(t, fakeConfig(t, 5, 2), &fakeBackend{})
	tr.RunDir = runDir
	tr.Log = zerolog.New(buf)
	start, err := tr.Restore(filepath.Join(checkpointRoot(runDir), fmt.Sprintf("step-%06d", ck)))
	if err != nil || start != ck {
		t.Fatalf("restore step %d: %d, %v", ck, start, err)
	}
	return tr, tr.Run(context.Background(), start)
}

// A resume rewrites metrics.jsonl without the rows after its checkpoint;
// any line that is not a row (corrupt, random bytes, a 65 MiB line, a torn
// last line) is moved byte for byte to metrics.jsonl.unreadable with a
// warning naming its line, and every row is still there once. The code
// before this read the file with a line scanner: it dropped such lines
// with no word, and a line over 64 MiB ended the scan, losing every row
// after it.
func TestResumeKeepsUnreadableLines(t *testing.T) {
	huge := append([]byte(`{"step":`), bytes.Repeat([]byte("7"), 65<<20)...) // 65 MiB, no closing brace
	random := []byte{0x8f, 0x00, 0xfe, '{', 0x22, 0x13, 0x7f, 0xc3}
	cases := []struct {
		name string
		// edit returns the file with its bad lines, and those lines with
		// their 1-based numbers.
		edit func(lines [][]byte) ([][]byte, [][]byte, []int)
		torn bool
		want []int // the steps metrics.jsonl holds after the resume
	}{
		{"row 1 replaced", func(l [][]byte) ([][]byte, [][]byte, []int) {
			bad := []byte(`{"step":1,"reward/acc":0.5,"tru`)
			return [][]byte{l[0], bad, l[2], l[3], l[4], l[5]}, [][]byte{bad}, []int{2}
		}, false, []int{0, 2, 3, 4, 5}},
		{"random bytes after row 0", func(l [][]byte) ([][]byte, [][]byte, []int) {
			return [][]byte{l[0], random, l[1], l[2], l[3], l[4], l[5]}, [][]byte{random}, []int{2}
		}, false, []int{0, 1, 2, 3, 4, 5}},
		{"a 65 MiB line after row 0, and a row without a step", func(l [][]byte) ([][]byte, [][]byte, []int) {
			nostep := []byte(`{"reward/acc":1}`)
			return [][]byte{l[0], huge, l[1], nostep, l[2], l[3], l[4], l[5]}, [][]byte{huge, nostep}, []int{2, 4}
		}, false, []int{0, 1, 2, 3, 4, 5}},
		{"a torn last line", func(l [][]byte) ([][]byte, [][]byte, []int) {
			torn := []byte(`{"step":6,"reward/a`)
			return [][]byte{l[0], l[1], l[2], l[3], l[4], l[5], torn}, [][]byte{torn}, []int{7}
		}, true, []int{0, 1, 2, 3, 4, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, before := finishedRun(t)
			lines := bytes.Split(bytes.TrimSuffix(before, []byte("\n")), []byte("\n"))
			edited, bad, at := c.edit(lines)
			text := bytes.Join(edited, []byte("\n"))
			if !c.torn {
				text = append(text, '\n')
			}
			path := filepath.Join(tr.RunDir, "metrics.jsonl")
			if err := os.WriteFile(path, text, 0o644); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			if _, err := resumeFrom(t, tr.RunDir, 2, &log); err != nil {
				t.Fatal(err)
			}
			if got := metricSteps(t, tr.RunDir); !slices.Equal(got, c.want) {
				t.Fatalf("after resume: steps %v, want %v", got, c.want)
			}
			after, _ := os.ReadFile(path)
			if !bytes.HasPrefix(after, append(lines[0], '\n')) {
				t.Fatal("row 0 changed on resume")
			}
			side, err := os.ReadFile(filepath.Join(tr.RunDir, UnreadableMetricsName))
			if err != nil {
				t.Fatalf("no %s: %v", UnreadableMetricsName, err)
			}
			if want := append(bytes.Join(bad, []byte("\n")), '\n'); !bytes.Equal(side, want) {
				t.Fatalf("%s holds %d bytes, want the %d bad lines' %d bytes as they were", UnreadableMetricsName, len(side), len(bad), len(want))
			}
			for _, n := range at {
				if want := fmt.Sprintf("metrics.jsonl line %d is not a metrics row", n); !strings.Contains(log.String(), want) {
					t.Errorf("no warning %q in the log:\n%.2000s", want, log.String())
				}
			}
			if c.torn && !strings.Contains(log.String(), "torn last line") {
				t.Errorf("the torn line's warning does not say it is torn:\n%s", log.String())
			}
		})
	}
}

// metrics.jsonl that is a named pipe is refused at once, naming it (a read
// of a FIFO blocks until a writer comes: the resume hung, and SIGINT could
// not end it).
func TestResumeRefusesNonRegularMetrics(t *testing.T) {
	tr, _ := finishedRun(t)
	path := filepath.Join(tr.RunDir, "metrics.jsonl")
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		var log bytes.Buffer
		_, err := resumeFrom(t, tr.RunDir, 2, &log)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a named pipe)") || !strings.Contains(err.Error(), path) {
			t.Fatalf("got %v, want an error naming %s as a named pipe", err, path)
		}
	case <-time.After(30 * time.Second):
		// Open a writer so the blocked reader returns and the test ends.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("the resume blocked on a named-pipe metrics.jsonl")
	}
}

// saveFails is a backend whose Save writes a megabyte and then fails as a
// full disk does.
type saveFails struct{ *fakeBackend }

func (b saveFails) Save(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "policy.txt"), make([]byte, 1<<20), 0o644); err != nil {
		return err
	}
	return fmt.Errorf("write %s: %w", filepath.Join(dir, "critic.txt"), syscall.ENOSPC)
}

// A checkpoint that fails removes its .partial directory at once (it kept
// the disk full until the next resume), and the previous checkpoint stays
// the one a resume finds.
func TestFailedCheckpointRemovesPartial(t *testing.T) {
	tr, _ := finishedRun(t)
	tr.Backend = saveFails{&fakeBackend{}}
	err := tr.Checkpoint(6)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want the save's ENOSPC", err)
	}
	entries, _ := os.ReadDir(checkpointRoot(tr.RunDir))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), partialSuffix) {
			t.Fatalf("%s left behind after the failed checkpoint", e.Name())
		}
	}
	if dir, _, err := ResumeCheckpoint(tr.RunDir); err != nil || filepath.Base(dir) != "step-000005" {
		t.Fatalf("resume finds %q (%v), want step-000005", dir, err)
	}
}

// Resuming a finished run without more steps does nothing: no evaluation,
// metrics.jsonl unchanged byte for byte (the code before this removed the
// final row and evaluated again, so a kill then left the run a row short),
// and Final and LastStep read back from the file. Asked for more steps, it
// trains on.
func TestResumeFinishedRunIsNoOp(t *testing.T) {
	tr, before := finishedRun(t)
	path := filepath.Join(tr.RunDir, "metrics.jsonl")
	var log bytes.Buffer
	again, err := resumeFrom(t, tr.RunDir, 5, &log)
	if err != nil {
		t.Fatal(err)
	}
	if !again.AlreadyDone {
		t.Fatal("AlreadyDone not set")
	}
	if calls := again.Backend.(*fakeBackend).calls; len(calls) != 0 {
		t.Fatalf("the backend was called: %v", calls)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, before) {
		t.Fatalf("metrics.jsonl changed:\n%s\nwas\n%s", after, before)
	}
	if !strings.Contains(log.String(), "nothing to do: the run finished at step 5") {
		t.Fatalf("log does not say nothing to do:\n%s", log.String())
	}
	if again.Final["val/v/avg@4"] != tr.Final["val/v/avg@4"] || again.LastStep["reward/mean"] != tr.LastStep["reward/mean"] || len(again.Final) != len(tr.Final) {
		t.Fatalf("Final %v LastStep %v, want %v and %v", again.Final, again.LastStep, tr.Final, tr.LastStep)
	}

	// More steps: steps 5 and 6 train, the evaluation after 7 ends it.
	more := fakeTrainer(t, fakeConfig(t, 7, 2), &fakeBackend{})
	more.RunDir = tr.RunDir
	start, err := more.Restore(filepath.Join(checkpointRoot(tr.RunDir), "step-000005"))
	if err != nil {
		t.Fatal(err)
	}
	if err := more.Run(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	if more.AlreadyDone {
		t.Fatal("AlreadyDone with more steps asked for")
	}
	if got := metricSteps(t, tr.RunDir); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("steps %v after training on to 7", got)
	}
}
