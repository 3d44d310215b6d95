package board

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cde-rl/cde/bench"
)

// benchCache is what a bench's page computes rarely: its bench file and
// its live verdicts (judged again only when an arm-seed finishes).
type benchCache struct {
	mu         sync.Mutex
	specKey    string
	spec       *bench.Spec
	specSource string
	specNote   string
	totals     map[string]int // "arm/seed" -> train.steps from the bench file
	verdictKey string
	verdicts   []bench.ClaimVerdict
	verdictErr string
}

// cell is one arm-seed of a bench's grid.
type cell struct {
	Arm  string `json:"arm"`
	Seed uint64 `json:"seed"`
	ID   string `json:"id"` // its run's ID
	runState
	// Corrupt is how many lines of its metrics.jsonl are not metrics rows.
	Corrupt int `json:"corrupt,omitempty"`
}

// gridView is a bench's arm x seed grid and its state.
type gridView struct {
	State  string           `json:"state"` // running, done, failed, incomplete or pending
	Locked bool             `json:"locked,omitempty"`
	Arms   []string         `json:"arms"`
	Seeds  []uint64         `json:"seeds"`
	Cells  []cell           `json:"cells"`
	Counts map[string]int   `json:"counts"`
	Spec   string           `json:"spec"` // where the arms and seeds come from
	Note   string           `json:"spec_note,omitempty"`
	Claims []map[string]any `json:"claims,omitempty"`

	Version string `json:"version"`
	// Exited: the bench process is known to have exited (its lock seen
	// released, or there is none) and no arm-seed runs: what its files
	// say now is final until it is run again.
	Exited bool `json:"exited"`

	spec *bench.Spec
	dir  string // absolute
	bc   *benchCache
}

func (s *Server) benchCache(id string) *benchCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	bc := s.benches[id]
	if bc == nil {
		bc = &benchCache{totals: map[string]int{}}
		s.benches[id] = bc
	}
	return bc
}

// grid reads a bench's arm-seeds and their states.
func (s *Server) grid(rt *root, rel string, n int, locks lockTable, now time.Time) gridView {
	id := makeID(n, rel)
	g := gridView{dir: filepath.Join(rt.path, rel), Counts: map[string]int{}, bc: s.benchCache(id)}
	arms := map[string]bool{}
	seeds := map[uint64]bool{}
	armDirs, _ := readDir(rt.r, join(rel, "runs"))
	for _, a := range armDirs {
		seedDirs, _ := readDir(rt.r, join(rel, "runs", a.Name()))
		for _, sd := range seedDirs {
			m := seedDirRE.FindStringSubmatch(sd.Name())
			if m == nil {
				continue
			}
			seed, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				continue
			}
			arms[a.Name()] = true
			seeds[seed] = true
		}
	}
	spec, source, note := s.benchSpec(rt, rel, g.bc, arms, seeds)
	g.spec, g.Spec, g.Note = spec, source, note
	if spec != nil {
		if spec.BaseEval {
			g.Arms = append(g.Arms, bench.BaseArm)
		}
		for _, a := range spec.Arms {
			g.Arms = append(g.Arms, a.Name)
		}
		g.Seeds = slices.Clone(spec.Seeds)
		for _, c := range spec.Claims {
			g.Claims = append(g.Claims, map[string]any{"name": c.Name, "better": c.Better, "than": c.Than, "metric": c.Metric,
				"lower_is_better": c.LowerIsBetter, "window": c.Window})
		}
	} else {
		for a := range arms {
			g.Arms = append(g.Arms, a)
		}
		slices.SortFunc(g.Arms, func(a, b string) int {
			if (a == bench.BaseArm) != (b == bench.BaseArm) {
				if a == bench.BaseArm {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for sd := range seeds {
			g.Seeds = append(g.Seeds, sd)
		}
		slices.Sort(g.Seeds)
	}
	var versions []string
	for _, arm := range g.Arms {
		for _, seed := range g.Seeds {
			crel := join(rel, "runs", arm, fmt.Sprintf("seed-%d", seed))
			cid := makeID(n, crel)
			total := 0
			if spec != nil && arm != bench.BaseArm {
				total = s.specSteps(g.bc, spec, g.dir, arm, seed)
			}
			c := cell{Arm: arm, Seed: seed, ID: cid, runState: s.runInfo(rt, crel, cid, total, true, locks, now)}
			g.Cells = append(g.Cells, c)
			g.Counts[c.State]++
			versions = append(versions, c.Version, c.State) // a state changes without a file: a lock released
		}
	}
	var released bool
	g.Locked, released = s.lockState(rt, join(rel, ".lock"), id, locks)
	g.Exited = !g.Locked && g.Counts[stateRunning] == 0 && (released || !exists(rt.r, join(rel, ".lock")))
	for _, f := range []string{"results.csv", bench.VerdictsFile, bench.ClaimsFile, "commands.txt"} {
		if fi, err := rt.r.Stat(join(rel, f)); err == nil {
			versions = append(versions, fmt.Sprint(fi.ModTime().UnixNano()))
		}
	}
	g.Version = fmt.Sprintf("%x", hashStrings(versions))
	switch {
	case g.Locked || g.Counts[stateRunning] > 0:
		g.State = stateRunning
	case len(g.Cells) > 0 && g.Counts[stateDone] == len(g.Cells):
		g.State = stateDone
	case g.Counts[stateFailed] > 0:
		g.State = stateFailed
	case g.Counts[stateDone] > 0:
		g.State = "incomplete"
	default:
		g.State = statePending
	}
	return g
}

// hashStrings is FNV-1a over ss.
func hashStrings(ss []string) uint64 {
	h := uint64(14695981039346656037)
	for _, s := range ss {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	return h
}

// specSteps is train.steps of an arm-seed by the bench file.
func (s *Server) specSteps(bc *benchCache, spec *bench.Spec, dir, arm string, seed uint64) int {
	key := fmt.Sprintf("%s/%d", arm, seed)
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if n, ok := bc.totals[key]; ok {
		return n
	}
	n := 0
	if a, ok := spec.Arm(arm); ok {
		if cfg, err := spec.ArmConfig(dir, a, seed); err == nil {
			n = cfg.Train.Steps
		}
	}
	bc.totals[key] = n
	return n
}

// commandStems are the stems of the bench files commands.txt's lines
// name with -c or --config.
func commandStems(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		for i, a := range f {
			var v string
			switch {
			case (a == "-c" || a == "--config" || a == "-config" || a == "--c") && i+1 < len(f):
				v = f[i+1]
			case strings.HasPrefix(a, "-c=") || strings.HasPrefix(a, "--c="):
				_, v, _ = strings.Cut(a, "=")
			case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config="):
				_, v, _ = strings.Cut(a, "=")
			default:
				continue
			}
			v = strings.Trim(v, `'"`)
			stem := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(v), ".yaml"), ".yml")
			if stem != "" && !slices.Contains(out, stem) {
				out = append(out, stem)
			}
		}
	}
	return out
}

// benchSpec finds a bench's bench file: a --spec of the stem commands.txt
// names (or of the directory's name), else the shipped preset it names;
// either must hold every arm and seed found. nil: none (the grid is what
// exists).
func (s *Server) benchSpec(rt *root, rel string, bc *benchCache, arms map[string]bool, seeds map[uint64]bool) (*bench.Spec, string, string) {
	data, _ := rt.r.ReadFile(join(rel, "commands.txt"))
	var found []string
	for a := range arms {
		found = append(found, a)
	}
	for sd := range seeds {
		found = append(found, fmt.Sprint(sd))
	}
	slices.Sort(found)
	key := string(data) + "\x00" + strings.Join(found, ",")
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.specKey == key && bc.specKey != "" {
		return bc.spec, bc.specSource, bc.specNote
	}
	stems := commandStems(string(data))
	base := filepath.Base(filepath.Join(rt.path, rel))
	fits := func(sp *bench.Spec) string {
		for a := range arms {
			if a == bench.BaseArm && sp.BaseEval {
				continue
			}
			if _, ok := sp.Arm(a); !ok {
				return "it has no arm " + a
			}
		}
		for sd := range seeds {
			if !slices.Contains(sp.Seeds, sd) {
				return fmt.Sprintf("it has no seed %d", sd)
			}
		}
		return ""
	}
	var spec *bench.Spec
	var source string
	var notes []string
	for _, sp := range s.o.Specs {
		if !slices.Contains(stems, sp.Stem) && sp.Stem != base {
			continue
		}
		if why := fits(sp); why != "" {
			notes = append(notes, fmt.Sprintf("--spec %s does not fit: %s", sp.File, why))
			continue
		}
		spec, source = sp, "--spec "+filepath.ToSlash(sp.File)
		break
	}
	for _, st := range stems {
		if spec != nil {
			break
		}
		sp, err := bench.LoadPreset(st)
		if err != nil {
			continue
		}
		if why := fits(sp); why != "" {
			notes = append(notes, fmt.Sprintf("the preset %s named in commands.txt does not fit (edited since?): %s", st, why))
			continue
		}
		spec, source = sp, "preset "+st+" (named in commands.txt)"
	}
	note := ""
	if spec == nil {
		source = "the directories found"
		note = "no bench file: the grid shows the arms and seeds that have a directory (arm-seeds not started are unknown) and verdicts only from verdicts.json; " +
			"give the bench file with --spec FILE for the whole grid and live verdicts"
		if len(notes) > 0 {
			note += " (" + strings.Join(notes, "; ") + ")"
		}
	}
	bc.specKey, bc.spec, bc.specSource, bc.specNote = key, spec, source, note
	bc.totals = map[string]int{}
	bc.verdictKey = ""
	return spec, source, note
}

// resultsView is results.csv.
type resultsView struct {
	Header      []string   `json:"header"`
	Rows        [][]string `json:"rows"`
	Provisional bool       `json:"provisional"`
	Updated     string     `json:"updated"`
	Note        string     `json:"note,omitempty"`
}

// verdictsView is the verdict table.
type verdictsView struct {
	Source      string               `json:"source"` // verdicts.json or live
	Provisional bool                 `json:"provisional"`
	Note        string               `json:"note,omitempty"`
	Rows        []bench.ClaimVerdict `json:"rows"`
}

// passCurve is pass@k against k of one arm on one eval set: the mean,
// lowest and highest over its finished seeds.
type passCurve struct {
	K    []int     `json:"k"`
	Mean []float64 `json:"mean"`
	Lo   []float64 `json:"lo"`
	Hi   []float64 `json:"hi"`
}

type passArm struct {
	Arm   string                `json:"arm"`
	Seeds int                   `json:"seeds"`
	Sets  map[string]*passCurve `json:"sets"`
}

// benchView is /api/bench.
type benchView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	gridView
	Results  *resultsView  `json:"results,omitempty"`
	Verdicts *verdictsView `json:"verdicts,omitempty"`
	// VerdictsNote says why there is no verdict table.
	VerdictsNote string    `json:"verdicts_note,omitempty"`
	PassSets     []string  `json:"pass_sets"`
	PassK        []passArm `json:"passk"`
	Metrics      []string  `json:"metrics"`
}

var passRE = regexp.MustCompile(`^val/([^/]+)/pass@(\d+)$`)

// benchView builds /api/bench for the bench rel under root n.
func (s *Server) benchView(rt *root, rel string, n int) (*benchView, error) {
	entries, err := readDir(rt.r, rel)
	if err != nil {
		return nil, errNotFound
	}
	has := map[string]fs.DirEntry{}
	for _, e := range entries {
		has[e.Name()] = e
	}
	if !isBench(rt, rel, has) {
		return nil, fmt.Errorf("%w: not a bench directory", errNotFound)
	}
	now := s.o.Now()
	g := s.grid(rt, rel, n, s.lockTable(now), now)
	v := &benchView{ID: makeID(n, rel), Name: displayName(rt, rel), gridView: g}
	// final: nothing more will be written until the bench is run again
	// (every arm-seed done, or the bench exited with some failed).
	done := g.State == stateDone
	final := done || g.Exited
	var newestDone time.Time
	for _, c := range g.Cells {
		if c.State == stateDone {
			if fi, err := rt.r.Stat(join(c.relIn(rel), bench.DoneFile)); err == nil && fi.ModTime().After(newestDone) {
				newestDone = fi.ModTime()
			}
		}
	}
	// results.csv
	if fi, err := rt.r.Stat(join(rel, "results.csv")); err == nil {
		if data, err := rt.r.ReadFile(join(rel, "results.csv")); err == nil {
			if recs, err := csv.NewReader(strings.NewReader(string(data))).ReadAll(); err == nil && len(recs) > 0 {
				r := &resultsView{Header: recs[0], Rows: recs[1:], Updated: fi.ModTime().UTC().Format(time.RFC3339)}
				switch {
				case fi.ModTime().Before(newestDone):
					r.Provisional, r.Note = true, "written before the last arm-seed finished: it lacks the newest runs"
				case !final:
					r.Provisional, r.Note = true, "written by an earlier report; the bench is not done"
				case !done:
					r.Note = exitedNote(g)
				}
				v.Results = r
			}
		}
	}
	// verdicts
	v.Verdicts, v.VerdictsNote = s.benchVerdicts(rt, rel, g, final, newestDone)
	// pass@k and the metric names, from the runs' metrics
	names := map[string]bool{}
	perArm := map[string]map[string]map[int][]float64{} // arm -> set -> k -> per seed
	seedsDone := map[string]int{}
	for _, c := range g.Cells {
		if c.Version == "" {
			continue
		}
		rc, err := s.run(rt, c.relIn(rel), c.ID)
		if err != nil {
			continue
		}
		for k := range rc.metrics {
			names[k] = true
		}
		for i := range v.Cells {
			if v.Cells[i].ID == c.ID {
				v.Cells[i].Corrupt = rc.bad
			}
		}
		if c.State == stateDone {
			seedsDone[c.Arm]++
			for k, ser := range rc.metrics {
				m := passRE.FindStringSubmatch(k)
				if m == nil || len(ser.y) == 0 {
					continue
				}
				kk, _ := strconv.Atoi(m[2])
				if perArm[c.Arm] == nil {
					perArm[c.Arm] = map[string]map[int][]float64{}
				}
				if perArm[c.Arm][m[1]] == nil {
					perArm[c.Arm][m[1]] = map[int][]float64{}
				}
				perArm[c.Arm][m[1]][kk] = append(perArm[c.Arm][m[1]][kk], ser.y[len(ser.y)-1])
			}
		}
		rc.mu.Unlock()
	}
	for k := range names {
		v.Metrics = append(v.Metrics, k)
	}
	slices.Sort(v.Metrics)
	sets := map[string]bool{}
	for _, arm := range g.Arms {
		pa := perArm[arm]
		if pa == nil {
			continue
		}
		a := passArm{Arm: arm, Seeds: seedsDone[arm], Sets: map[string]*passCurve{}}
		for set, byK := range pa {
			sets[set] = true
			pc := &passCurve{}
			var ks []int
			for k := range byK {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			for _, k := range ks {
				xs := byK[k]
				lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
				for _, x := range xs {
					lo, hi, sum = min(lo, x), max(hi, x), sum+x
				}
				pc.K = append(pc.K, k)
				pc.Mean = append(pc.Mean, sum/float64(len(xs)))
				pc.Lo = append(pc.Lo, lo)
				pc.Hi = append(pc.Hi, hi)
			}
			a.Sets[set] = pc
		}
		v.PassK = append(v.PassK, a)
	}
	for set := range sets {
		v.PassSets = append(v.PassSets, set)
	}
	slices.SortFunc(v.PassSets, func(a, b string) int {
		if (a == "mean") != (b == "mean") {
			if a == "mean" {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return v, nil
}

// relIn is the cell's run directory under its root, given the bench's.
func (c cell) relIn(benchRel string) string {
	return join(benchRel, "runs", c.Arm, fmt.Sprintf("seed-%d", c.Seed))
}

// exitedNote says what a final report of a bench that exited with
// arm-seeds not done covers.
func exitedNote(g gridView) string {
	return fmt.Sprintf("the bench exited with %d of %d arm-seeds done (%d failed, %d not started): the report covers the finished ones only; rerun the bench to resume the rest",
		g.Counts[stateDone], len(g.Cells), g.Counts[stateFailed], g.Counts[statePending])
}

// benchVerdicts is the verdict table: the bench's verdicts.json once it
// is done or has exited (and written after its last arm-seed), else the claims judged
// now on the arm-seeds finished (bench.Verdicts, given the bench file),
// else an older verdicts.json marked provisional.
func (s *Server) benchVerdicts(rt *root, rel string, g gridView, final bool, newestDone time.Time) (*verdictsView, string) {
	done := g.State == stateDone
	var file []bench.ClaimVerdict
	fileOK := false
	var fileTime time.Time
	if fi, err := rt.r.Stat(join(rel, bench.VerdictsFile)); err == nil {
		if data, err := rt.r.ReadFile(join(rel, bench.VerdictsFile)); err == nil && json.Unmarshal(data, &file) == nil {
			fileOK, fileTime = true, fi.ModTime()
		}
	}
	if final && fileOK && !fileTime.Before(newestDone) {
		vv := &verdictsView{Source: bench.VerdictsFile, Rows: file}
		if !done {
			vv.Note = exitedNote(g)
		}
		return vv, ""
	}
	if g.spec != nil && len(g.spec.Claims) > 0 {
		rows, err := s.liveVerdicts(rt, rel, g)
		if err == nil {
			vv := &verdictsView{Source: "live", Provisional: !final, Rows: rows}
			switch {
			case !final:
				vv.Note = fmt.Sprintf("judged now on the %d of %d arm-seeds finished; verdicts change as more finish", g.Counts[stateDone], len(g.Cells))
			case done:
				vv.Note = "judged now: every arm-seed is done, but no verdicts.json was written after the last one (run the bench's --report-only)"
			default:
				vv.Note = "judged now on the finished arm-seeds: " + exitedNote(g) + "; no verdicts.json was written after the last one"
			}
			return vv, ""
		}
		if !fileOK {
			return nil, "claims not judged: " + err.Error()
		}
	}
	if fileOK {
		note := "written by an earlier report; the bench is not done"
		if final {
			note = "written before the last arm-seed finished"
		}
		return &verdictsView{Source: bench.VerdictsFile, Provisional: true, Rows: file, Note: note}, ""
	}
	if g.spec != nil && len(g.spec.Claims) == 0 {
		return nil, "the bench file lists no claims"
	}
	return nil, "no verdicts.json yet, and no bench file to judge the claims live (--spec FILE)"
}

// liveVerdicts judges the claims on the finished arm-seeds, again only
// when one has finished since.
func (s *Server) liveVerdicts(rt *root, rel string, g gridView) ([]bench.ClaimVerdict, error) {
	var key []string
	for _, c := range g.Cells {
		if c.State == stateDone {
			key = append(key, c.ID+"@"+c.Version)
		}
	}
	if fi, err := rt.r.Stat(join(rel, bench.ClaimsFile)); err == nil {
		key = append(key, fmt.Sprint(fi.ModTime().UnixNano()))
	}
	k := strings.Join(key, "\n")
	bc := g.bc
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.verdictKey == k && k != "" {
		if bc.verdictErr != "" {
			return nil, fmt.Errorf("%s", bc.verdictErr)
		}
		return bc.verdicts, nil
	}
	bc.verdictKey, bc.verdicts, bc.verdictErr = k, nil, ""
	// The bench package reads the files by path: first make sure no link
	// under the bench leads out of the directory served.
	if bad := linkLeaving(rt, rel, 0); bad != "" {
		bc.verdictErr = "a symbolic link under the bench leaves the directory served (" + filepath.ToSlash(bad) + ")"
		return nil, fmt.Errorf("%s", bc.verdictErr)
	}
	rows, _, err := bench.Verdicts(g.spec, g.dir)
	if err != nil {
		bc.verdictErr = err.Error()
		return nil, err
	}
	bc.verdicts = rows
	return rows, nil
}

// linkLeaving returns the first symbolic link under rel (the bench files
// the claim rule reads: runs, evals, records) that does not resolve
// inside the root, or "".
func linkLeaving(rt *root, rel string, depth int) string {
	entries, err := readDir(rt.r, rel)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		name := join(rel, e.Name())
		if depth == 0 && (e.Name() == "base" || e.Name() == "plots" || e.Name() == "slurm-logs") {
			continue
		}
		if e.Name() == "checkpoints" {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			fi, err := rt.r.Stat(name)
			if err != nil {
				return name
			}
			isDir = fi.IsDir()
		}
		if isDir && depth < 5 {
			if bad := linkLeaving(rt, name, depth+1); bad != "" {
				return bad
			}
		}
	}
	return ""
}
