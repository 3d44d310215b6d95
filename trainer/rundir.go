package trainer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// lockName is the lock file of a run directory; the pid of the holder is
// written into it for the error a second process gets.
const lockName = ".lock"

// runFiles are the entries that make a directory hold a run.
var runFiles = []string{"config.yaml", "metrics.jsonl", "checkpoints"}

// RunDir is a run directory held by this process: an exclusive lock on
// RUN/.lock keeps any other cde-run out until Close (or the process's
// death, however it dies).
type RunDir struct {
	Path    string
	lock    *os.File
	created bool // made by this process (Discard may remove it)
}

// ErrRunDirInUse is returned when another process holds the run directory.
var ErrRunDirInUse = errors.New("run directory in use")

// NewRunDir makes path the directory of a new run. A missing or empty
// directory is taken; one that holds a run (config.yaml, metrics.jsonl or
// checkpoints/) is refused unless overwrite, which deletes those first.
// Other files (notes, a bench's spec) are left alone.
func NewRunDir(path string, overwrite bool) (*RunDir, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	created := false
	if err := os.Mkdir(path, 0o755); err == nil {
		created = true
	} else if !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	d, err := lockRunDir(path)
	if err != nil {
		return nil, err
	}
	d.created = created
	if held := d.holdsRun(); len(held) > 0 {
		if !overwrite {
			d.Close()
			return nil, fmt.Errorf("run directory %s already holds a run (%s): continue it with --resume %s, choose another --run-dir, or pass --overwrite to delete it",
				path, strings.Join(held, ", "), path)
		}
		for _, name := range held {
			if err := os.RemoveAll(filepath.Join(path, name)); err != nil {
				d.Close()
				return nil, fmt.Errorf("--overwrite: %w", err)
			}
		}
	}
	return d, nil
}

// NewRunDirUnder makes a fresh, uniquely named run directory under parent:
// prefix-YYYYMMDD-HHMMSS-<6 random hex digits>-suffix. The directory is
// created exclusively, so two runs started in the same instant never share
// one.
func NewRunDirUnder(parent, suffix string) (*RunDir, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	for range 100 {
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := time.Now().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]) + "-" + suffix
		path := filepath.Join(parent, name)
		err := os.Mkdir(path, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d, err := lockRunDir(path)
		if err != nil {
			return nil, err
		}
		d.created = true
		return d, nil
	}
	return nil, fmt.Errorf("could not make a unique run directory under %s", parent)
}

// OpenRunDir takes the existing run directory path (to resume it). A
// directory holding a lock and no run (a run killed before it wrote its
// config.yaml) is an error saying how to start that run again.
func OpenRunDir(path string) (*RunDir, error) {
	if _, err := os.Stat(filepath.Join(path, "config.yaml")); err != nil {
		if _, lerr := os.Stat(filepath.Join(path, lockName)); lerr == nil && errors.Is(err, os.ErrNotExist) {
			d := &RunDir{Path: path}
			if len(d.holdsRun()) == 0 {
				return nil, fmt.Errorf("resume: %s holds a lock but no config.yaml: the run died before it wrote its config (a cde-run from before 2026-11-27 wrote it only after making the base policy), so there is nothing to resume; start it again with: cde-run train --run-dir %s, with the --config and --set flags it was started with",
					path, path)
			}
		}
		return nil, fmt.Errorf("resume: %s is not a run directory: %w", path, err)
	}
	return lockRunDir(path)
}

func lockRunDir(path string) (*RunDir, error) {
	f, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	if !held {
		data, _ := os.ReadFile(f.Name())
		f.Close()
		who := ""
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); perr == nil {
			who = fmt.Sprintf(" (pid %d)", pid)
		}
		return nil, fmt.Errorf("%w: %s is used by another cde-run%s; wait for it or choose another directory", ErrRunDirInUse, path, who)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &RunDir{Path: path, lock: f}, nil
}

// holdsRun lists the run files present in the directory.
func (d *RunDir) holdsRun() []string {
	var held []string
	for _, name := range runFiles {
		if _, err := os.Stat(filepath.Join(d.Path, name)); err == nil {
			held = append(held, name)
		}
	}
	return held
}

// Discard removes a directory this process made when the run never got to
// write a metric row or a checkpoint (a failed start), then releases it.
// In a directory it did not make, it removes the run's files then (NewRunDir
// took the directory without them, so they are this run's). Anything else
// is left in place.
func (d *RunDir) Discard() {
	if d == nil {
		return
	}
	if !d.created && d.lock != nil && !d.hasProgress() {
		for _, name := range runFiles {
			os.RemoveAll(filepath.Join(d.Path, name))
		}
	}
	if d.created && !d.hasProgress() {
		entries, _ := os.ReadDir(d.Path)
		clean := true
		for _, e := range entries {
			switch e.Name() {
			case lockName, "config.yaml", "metrics.jsonl", "checkpoints":
			default:
				clean = false
			}
		}
		if clean {
			os.RemoveAll(d.Path)
		}
	}
	d.Close()
}

// hasProgress reports whether the run wrote a metrics row or a checkpoint.
func (d *RunDir) hasProgress() bool {
	if fi, err := os.Stat(filepath.Join(d.Path, "metrics.jsonl")); err == nil && fi.Size() > 0 {
		return true
	}
	entries, _ := os.ReadDir(checkpointRoot(d.Path))
	return len(entries) > 0
}

// Close releases the lock (the lock file stays).
func (d *RunDir) Close() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

// LockDir takes the run-directory lock (the file .lock) of path, a
// directory made if missing, for a process that owns a directory without
// being a run in it: a bench's --out. A second process gets an error
// wrapping ErrRunDirInUse that names the holder's pid. Close releases it.
func LockDir(path string) (*RunDir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	return lockRunDir(path)
}

// CheckNotInUse returns an error wrapping ErrRunDirInUse when another
// process holds path's lock, and nil when nobody does or path does not
// exist. It holds the lock only while it looks.
func CheckNotInUse(path string) error {
	if _, err := os.Stat(filepath.Join(path, lockName)); err != nil {
		return nil
	}
	d, err := lockRunDir(path)
	if err != nil {
		return err
	}
	return d.Close()
}
