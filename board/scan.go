package board

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cde-rl/cde/bench"
)

// States of a run or an arm-seed.
const (
	statePending = "pending" // nothing written yet (an arm-seed not started)
	stateRunning = "running" // its lock is held, or metrics.jsonl is fresh
	stateDone    = "done"    // DONE (an arm-seed), or the last step reached (a run)
	stateFailed  = "failed"  // not running and not finished: an error, an interrupt or a kill
)

// maxDepth is how deep under a directory runs and benches are looked for.
const maxDepth = 6

// skipDirs are never looked into for runs: a run's and a bench's own
// subdirectories.
var skipDirs = map[string]bool{"checkpoints": true, "evals": true, "plots": true, "slurm-logs": true, "node_modules": true}

var seedDirRE = regexp.MustCompile(`^seed-(\d+)$`)

// found is a run or a bench directory.
type found struct {
	root *root
	rel  string
	kind string // "run" or "bench"
}

// scan lists the runs and benches under every root.
func (s *Server) scan() []found {
	var out []found
	for _, rt := range s.roots {
		s.walk(rt, ".", 0, &out)
	}
	return out
}

func (s *Server) walk(rt *root, rel string, depth int, out *[]found) {
	entries, err := readDir(rt.r, rel)
	if err != nil {
		return
	}
	has := map[string]fs.DirEntry{}
	for _, e := range entries {
		has[e.Name()] = e
	}
	if _, ok := has["metrics.jsonl"]; ok {
		*out = append(*out, found{rt, rel, "run"})
		return
	}
	if isBench(rt, rel, has) {
		*out = append(*out, found{rt, rel, "bench"})
		return
	}
	if depth >= maxDepth {
		return
	}
	for _, e := range entries {
		// Symbolic links are not followed here: a link inside the
		// directory is still served when named, one leaving it never.
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !skipDirs[e.Name()] {
			s.walk(rt, join(rel, e.Name()), depth+1, out)
		}
	}
}

// isBench: runs/ARM/seed-N exists, or the bench's own records do.
func isBench(rt *root, rel string, has map[string]fs.DirEntry) bool {
	if _, ok := has["commands.txt"]; ok {
		if _, ok := has[bench.ClaimsFile]; ok {
			return true
		}
	}
	if e, ok := has["runs"]; !ok || !e.IsDir() {
		return false
	}
	arms, _ := readDir(rt.r, join(rel, "runs"))
	for _, a := range arms {
		if !a.IsDir() {
			continue
		}
		seeds, _ := readDir(rt.r, join(rel, "runs", a.Name()))
		for _, sd := range seeds {
			if seedDirRE.MatchString(sd.Name()) {
				return true
			}
		}
	}
	return false
}

func readDir(r *os.Root, name string) ([]fs.DirEntry, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func exists(r *os.Root, name string) bool {
	_, err := r.Stat(name)
	return err == nil
}

// runState is what the list and a bench's grid show of a run.
type runState struct {
	State   string   `json:"state"`
	Step    *float64 `json:"step,omitempty"`  // the last row's step
	Total   int      `json:"total,omitempty"` // train.steps
	ETA     *float64 `json:"eta_s,omitempty"` // seconds, while running
	Version string   `json:"version"`         // changes when metrics.jsonl or DONE does
	Updated string   `json:"updated,omitempty"`
	// Locked says its lock is held (a cde-run has it).
	Locked bool `json:"locked,omitempty"`
	// Failure says why a failed run stopped and how to resume it.
	Failure *failure `json:"failure,omitempty"`
}

// failure is what is known of a failed run: the reason the bench
// recorded (bench.FailedFile; "" when none was), when, and the command
// that resumes it.
type failure struct {
	Reason string `json:"reason,omitempty"`
	At     string `json:"at,omitempty"`
	Resume string `json:"resume,omitempty"`
	// Released: its lock was let go (seen here, not inferred from an old
	// metrics.jsonl).
	Released bool `json:"released,omitempty"`
}

// lockState is whether the lock file name under rt is held, and whether it
// is known released: it exists, /proc/locks is readable, and the file is
// on a local file system (so no other machine can hold it unseen), or
// this server saw it held before.
func (s *Server) lockState(rt *root, name, id string, locks lockTable) (held, released bool) {
	fi, err := rt.r.Stat(name)
	if err != nil {
		return false, false
	}
	held = locks.heldOn(fi)
	s.mu.Lock()
	seen := s.heldSeen[id]
	if held {
		s.heldSeen[id] = true
	}
	s.mu.Unlock()
	if held || !locks.known {
		return held, false
	}
	if seen {
		return false, true
	}
	f, err := rt.r.Open(name)
	if err != nil {
		return false, false
	}
	defer f.Close()
	return false, localLock(f)
}

// sample is a step seen at a time, for the ETA.
type sample struct {
	t    time.Time
	step float64
}

// tailInfo is what the last row of a metrics.jsonl said.
type tailInfo struct {
	version string
	step    *float64
	stepS   float64 // perf/step_s
}

// runInfo is the state of the run directory rel under rt. totalHint is
// train.steps when config.yaml does not say (an arm-seed not started);
// inBench says DONE alone marks it finished.
func (s *Server) runInfo(rt *root, rel, id string, totalHint int, inBench bool, locks lockTable, now time.Time) runState {
	var st runState
	doneFI, doneErr := rt.r.Stat(join(rel, bench.DoneFile))
	done := doneErr == nil
	mfi, merr := rt.r.Stat(join(rel, "metrics.jsonl"))
	var released bool
	st.Locked, released = s.lockState(rt, join(rel, ".lock"), id, locks)
	st.Total = s.configSteps(rt, rel)
	if st.Total == 0 {
		st.Total = totalHint
	}
	var stepS float64
	if merr == nil {
		st.Version = fmt.Sprintf("%d.%d", mfi.Size(), mfi.ModTime().UnixNano())
		st.Updated = mfi.ModTime().UTC().Format(time.RFC3339)
		t := s.tail(rt, rel, id, mfi, st.Version)
		st.Step, stepS = t.step, t.stepS
	}
	if done {
		st.Version += fmt.Sprintf("+%d", doneFI.ModTime().UnixNano())
	}
	// A fresh metrics.jsonl counts as running only while the lock cannot
	// be seen released: a killed trainer is failed at once.
	fresh := merr == nil && now.Sub(mfi.ModTime()) < s.o.StaleAfter && !released
	switch {
	case done:
		st.State = stateDone
	case st.Locked || fresh:
		st.State = stateRunning
	case merr != nil:
		if _, err := rt.r.Stat(rel); err == nil && (exists(rt.r, join(rel, "bench-time.json")) || exists(rt.r, join(rel, bench.FailedFile))) {
			st.State = stateFailed // an attempt that ended before its first row
		} else {
			st.State = statePending
		}
	case !inBench && st.Step != nil && st.Total > 0 && *st.Step >= float64(st.Total-1):
		st.State = stateDone
	default:
		st.State = stateFailed
	}
	if st.State == stateFailed {
		st.Failure = s.failureOf(rt, rel, inBench, released)
	}
	if st.State == stateRunning && st.Step != nil {
		if eta, ok := s.eta(id, *st.Step, st.Total, stepS, now); ok {
			st.ETA = &eta
		}
	}
	return st
}

// failureOf reads why a failed run stopped: an arm-seed's
// bench.FailedFile, and the command that resumes it (the bench command
// that ran it, or the last in the bench's commands.txt; for a run, cde-run
// train --resume when it has a checkpoint).
func (s *Server) failureOf(rt *root, rel string, inBench, released bool) *failure {
	f := &failure{Released: released}
	if !inBench {
		if exists(rt.r, join(rel, "checkpoints")) {
			f.Resume = "cde-run train --resume " + shellQuote(displayName(rt, rel))
		}
		return f
	}
	if data, err := rt.r.ReadFile(join(rel, bench.FailedFile)); err == nil {
		var rec struct{ Failed, Error, Command string }
		if json.Unmarshal(data, &rec) == nil {
			f.Reason, f.At, f.Resume = rec.Error, rec.Failed, rec.Command
		}
	}
	if f.Resume == "" {
		// …/runs/ARM/seed-N: the bench directory is three levels up.
		data, _ := rt.r.ReadFile(join(filepath.Dir(filepath.Dir(filepath.Dir(rel))), "commands.txt"))
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "cde-run bench") && !strings.Contains(line, "--report-only") {
				f.Resume = line
			}
		}
	}
	return f
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./@:+,=") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// tail is the last row's step and perf/step_s, read again only when the
// file changed.
func (s *Server) tail(rt *root, rel, id string, fi os.FileInfo, version string) tailInfo {
	s.mu.Lock()
	t, ok := s.tails[id]
	s.mu.Unlock()
	if ok && t.version == version {
		return t
	}
	t = tailInfo{version: version}
	for _, e := range tailRow(rt.r, join(rel, "metrics.jsonl"), fi.Size()) {
		switch e.key {
		case "step":
			v := e.v
			t.step = &v
		case "perf/step_s":
			t.stepS = e.v
		}
	}
	s.mu.Lock()
	s.tails[id] = t
	s.mu.Unlock()
	return t
}

// eta is the seconds left to reach total steps: from the steps this
// server saw go by (evaluations included) once it has watched for 5 s,
// else from the last row's perf/step_s.
func (s *Server) eta(id string, step float64, total int, stepS float64, now time.Time) (float64, bool) {
	if total <= 0 {
		return 0, false
	}
	left := float64(total) - step
	if left <= 0 {
		return 0, true
	}
	s.mu.Lock()
	seen := s.seen[id]
	if len(seen) == 0 || seen[len(seen)-1].step != step {
		seen = append(seen, sample{now, step})
	}
	// Keep two minutes, and at least the newest two samples.
	for len(seen) > 2 && now.Sub(seen[0].t) > 2*time.Minute {
		seen = seen[1:]
	}
	s.seen[id] = seen
	s.mu.Unlock()
	if len(seen) >= 2 {
		a, b := seen[0], seen[len(seen)-1]
		if dt := now.Sub(a.t).Seconds(); dt >= 5 && b.step > a.step {
			rate := (b.step - a.step) / dt
			return left / rate, true
		}
	}
	if stepS > 0 {
		return left * stepS, true
	}
	return 0, false
}

// configSteps is train.steps of rel/config.yaml (0 when it cannot say),
// parsed again only when the file changes.
func (s *Server) configSteps(rt *root, rel string) int {
	name := join(rel, "config.yaml")
	fi, err := rt.r.Stat(name)
	if err != nil {
		return 0
	}
	key := fmt.Sprintf("%p/%s", rt, name)
	ver := fmt.Sprintf("%d.%d", fi.Size(), fi.ModTime().UnixNano())
	s.mu.Lock()
	c, ok := s.configs[key]
	s.mu.Unlock()
	if ok && c.version == ver {
		return c.steps
	}
	c = configInfo{version: ver}
	if data, err := rt.r.ReadFile(name); err == nil {
		var cfg struct {
			Train struct {
				Steps int `yaml:"steps"`
			} `yaml:"train"`
		}
		if yaml.Unmarshal(data, &cfg) == nil {
			c.steps = cfg.Train.Steps
		}
	}
	s.mu.Lock()
	s.configs[key] = c
	s.mu.Unlock()
	return c.steps
}

type configInfo struct {
	version string
	steps   int
}

// item is one entry of /api/list.
type item struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // run or bench
	Root string `json:"root"` // the directory as given
	Path string `json:"path"` // under it ("." for the directory itself)
	Name string `json:"name"`
	runState
	// A bench's arm-seeds by state, and how many it has.
	Counts map[string]int `json:"counts,omitempty"`
	Cells  int            `json:"cells,omitempty"`
}

// listing is /api/list.
type listing struct {
	Dirs  []string `json:"dirs"`
	Items []item   `json:"items"`
	Time  string   `json:"time"`
	// Locks says whether held locks can be seen here (/proc/locks).
	Locks bool `json:"locks"`
}

func displayName(rt *root, rel string) string {
	if rel == "." {
		return filepath.ToSlash(rt.name)
	}
	return filepath.ToSlash(filepath.Join(rt.name, rel))
}

// listAll builds /api/list; a listing at most a second old is reused.
func (s *Server) listAll() *listing {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	now := s.o.Now()
	if s.list != nil && now.Sub(s.listAt) < time.Second {
		return s.list
	}
	locks := s.lockTable(now)
	l := &listing{Time: now.UTC().Format(time.RFC3339), Locks: locks.known, Items: []item{}}
	for _, rt := range s.roots {
		l.Dirs = append(l.Dirs, filepath.ToSlash(rt.name))
	}
	for _, f := range s.scan() {
		n := s.rootIndex(f.root)
		it := item{ID: makeID(n, f.rel), Kind: f.kind, Root: filepath.ToSlash(f.root.name), Path: filepath.ToSlash(f.rel), Name: displayName(f.root, f.rel)}
		if f.kind == "run" {
			it.runState = s.runInfo(f.root, f.rel, it.ID, 0, false, locks, now)
		} else {
			g := s.grid(f.root, f.rel, n, locks, now)
			it.State, it.Counts, it.Cells, it.Version, it.Locked = g.State, g.Counts, len(g.Cells), g.Version, g.Locked
		}
		l.Items = append(l.Items, it)
	}
	slices.SortStableFunc(l.Items, func(a, b item) int { return strings.Compare(a.ID, b.ID) })
	s.evict(now)
	s.list, s.listAt = l, now
	return l
}

// lockTable is /proc/locks, read at most once a second.
func (s *Server) lockTable(now time.Time) lockTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.locksAt) >= time.Second || !s.locksRead {
		s.locks, s.locksAt, s.locksRead = readLocks(), now, true
	}
	return s.locks
}

// evict drops the metrics of runs nobody asked for in 10 minutes.
func (s *Server) evict(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.runs {
		if c.mu.TryLock() {
			if now.Sub(c.used) > 10*time.Minute {
				delete(s.runs, id)
			}
			c.mu.Unlock()
		}
	}
}

// run returns the metrics of run rel under rt, brought up to date.
func (s *Server) run(rt *root, rel, id string) (*runCache, error) {
	s.mu.Lock()
	c := s.runs[id]
	if c == nil {
		c = &runCache{}
		s.runs[id] = c
	}
	s.mu.Unlock()
	c.mu.Lock()
	c.used = s.o.Now()
	err := c.update(rt.r, join(rel, "metrics.jsonl"))
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	return c, nil // locked: the caller unlocks
}

// isRunDir reports whether rel under rt holds a run (or is an arm-seed
// of a bench, started or not).
func isRunDir(rt *root, rel string) error {
	fi, err := rt.r.Stat(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errNotFound
		}
		return fmt.Errorf("%w: %v", errNotFound, err)
	}
	if !fi.IsDir() {
		return errNotFound
	}
	return nil
}
