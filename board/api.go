package board

import (
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
)

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.listAll())
}

// points is the request's points= (default and cap: Options.MaxPoints).
func (s *Server) points(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("points"))
	if err != nil || n <= 0 || n > s.o.MaxPoints {
		return s.o.MaxPoints
	}
	return max(n, 4)
}

// runView is /api/run.
type runView struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Rows    int      `json:"rows"`
	Metrics []string `json:"metrics"`
	// Corrupt is how many lines of metrics.jsonl are not metrics rows
	// (skipped), CorruptLines the first of their line numbers.
	Corrupt      int   `json:"corrupt"`
	CorruptLines []int `json:"corrupt_lines,omitempty"`
	runState
}

// dirParam resolves a request's id to its directory under a root and
// checks it is one (isRunDir); on an error it answers the request itself
// and ok is false.
func (s *Server) dirParam(w http.ResponseWriter, id string) (rt *root, rel string, ok bool) {
	rt, rel, err := s.resolve(id)
	if err == nil {
		err = isRunDir(rt, rel)
	}
	if err != nil {
		idError(w, err)
		return nil, "", false
	}
	return rt, rel, true
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	rt, rel, ok := s.dirParam(w, id)
	if !ok {
		return
	}
	now := s.o.Now()
	v := runView{ID: id, Name: displayName(rt, rel)}
	v.runState = s.runInfo(rt, rel, id, 0, s.inBench(rt, rel), s.lockTable(now), now)
	rc, err := s.run(rt, rel, id)
	if err != nil {
		idError(w, err)
		return
	}
	v.Rows, v.Metrics, v.Corrupt, v.CorruptLines = rc.rows, rc.names(), rc.bad, slices.Clone(rc.badLines)
	rc.mu.Unlock()
	writeJSON(w, v)
}

// inBench reports whether rel is an arm-seed's directory (…/runs/ARM/seed-N
// of a bench): then DONE alone says it finished.
func (s *Server) inBench(rt *root, rel string) bool {
	if !seedDirRE.MatchString(filepath.Base(rel)) {
		return false
	}
	return filepath.Base(filepath.Dir(filepath.Dir(rel))) == "runs"
}

// seriesOut is one metric of a run as sent: decimated points, the number
// logged, and the last logged point (exact, whatever the decimation).
type seriesOut struct {
	X     []float64 `json:"x"`
	Y     []float64 `json:"y"`
	N     int       `json:"n"`
	LastX float64   `json:"last_x"`
	LastY float64   `json:"last_y"`
}

func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("id")
	rt, rel, ok := s.dirParam(w, id)
	if !ok {
		return
	}
	limit := s.points(r)
	rc, err := s.run(rt, rel, id)
	if err != nil {
		idError(w, err)
		return
	}
	out := map[string]*seriesOut{}
	for _, m := range q["m"] {
		ser := rc.metrics[m]
		if ser == nil || len(ser.x) == 0 {
			continue
		}
		x, y := decimate(ser.x, ser.y, limit)
		out[m] = &seriesOut{X: slices.Clone(x), Y: slices.Clone(y), N: len(ser.x), LastX: ser.x[len(ser.x)-1], LastY: ser.y[len(ser.y)-1]}
	}
	rows, last, bad := rc.rows, rc.last, rc.bad
	rc.mu.Unlock()
	writeJSON(w, map[string]any{"id": id, "rows": rows, "last_step": last, "corrupt": bad, "series": out})
}

func (s *Server) handleBench(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	rt, rel, err := s.resolve(id)
	if err != nil {
		idError(w, err)
		return
	}
	v, err := s.benchView(rt, rel, s.rootIndex(rt))
	if err != nil {
		idError(w, err)
		return
	}
	writeJSON(w, v)
}

// bandOut is one arm's curve of a metric: per step, the mean, lowest and
// highest value over the seeds that logged that step, and how many did;
// failed arm-seeds are left out, as the report leaves them out (running
// ones count as far as they have got).
type bandOut struct {
	Arm  string    `json:"arm"`
	X    []float64 `json:"x"`
	Mean []float64 `json:"mean"`
	Lo   []float64 `json:"lo"`
	Hi   []float64 `json:"hi"`
	N    []int     `json:"n"`
}

func (s *Server) handleBenchSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("id")
	rt, rel, ok := s.dirParam(w, id)
	if !ok {
		return
	}
	n := s.rootIndex(rt)
	now := s.o.Now()
	g := s.grid(rt, rel, n, s.lockTable(now), now)
	limit := s.points(r)
	metrics := q["m"]
	// per metric, per arm: step -> values over seeds
	type acc struct {
		sum, lo, hi float64
		n           int
	}
	perSeed := q.Get("seeds") == "1"
	seedsOut := map[string][]seedOut{}
	out := map[string][]bandOut{}
	per := make([]map[string]map[float64]*acc, len(metrics))
	for i := range per {
		per[i] = map[string]map[float64]*acc{}
	}
	for _, c := range g.Cells {
		if c.Version == "" {
			continue
		}
		rc, err := s.run(rt, c.relIn(rel), c.ID)
		if err != nil {
			continue
		}
		for i, m := range metrics {
			ser := rc.metrics[m]
			if ser == nil {
				continue
			}
			if perSeed {
				x, y := decimate(ser.x, ser.y, limit)
				seedsOut[m] = append(seedsOut[m], seedOut{Arm: c.Arm, Seed: c.Seed, State: c.State, X: slices.Clone(x), Y: slices.Clone(y)})
			}
			if c.State == stateFailed {
				continue // as in the report: a failed arm-seed is no seed of its arm
			}
			byStep := per[i][c.Arm]
			if byStep == nil {
				byStep = map[float64]*acc{}
				per[i][c.Arm] = byStep
			}
			for j, x := range ser.x {
				y := ser.y[j]
				a := byStep[x]
				if a == nil {
					byStep[x] = &acc{sum: y, lo: y, hi: y, n: 1}
					continue
				}
				a.sum += y
				a.lo, a.hi = math.Min(a.lo, y), math.Max(a.hi, y)
				a.n++
			}
		}
		rc.mu.Unlock()
	}
	for i, m := range metrics {
		for _, arm := range g.Arms {
			byStep := per[i][arm]
			if len(byStep) == 0 {
				continue
			}
			xs := make([]float64, 0, len(byStep))
			for x := range byStep {
				xs = append(xs, x)
			}
			slices.Sort(xs)
			b := bandOut{Arm: arm}
			for _, x := range xs {
				a := byStep[x]
				b.X = append(b.X, x)
				b.Mean = append(b.Mean, a.sum/float64(a.n))
				b.Lo = append(b.Lo, a.lo)
				b.Hi = append(b.Hi, a.hi)
				b.N = append(b.N, a.n)
			}
			out[m] = append(out[m], thinBand(b, limit))
		}
	}
	res := map[string]any{"id": id, "version": g.Version, "series": out}
	if perSeed {
		res["seeds"] = seedsOut
	}
	writeJSON(w, res)
}

// seedOut is one arm-seed's values of a metric (seeds=1), failed ones too.
type seedOut struct {
	Arm   string    `json:"arm"`
	Seed  uint64    `json:"seed"`
	State string    `json:"state"`
	X     []float64 `json:"x"`
	Y     []float64 `json:"y"`
}

// thinBand merges consecutive steps into at most limit points: x and
// mean averaged, lo the lowest, hi the highest.
func thinBand(b bandOut, limit int) bandOut {
	n := len(b.X)
	if n <= limit {
		return b
	}
	o := bandOut{Arm: b.Arm}
	for k := range limit {
		lo, hi := k*n/limit, (k+1)*n/limit
		if lo >= hi {
			continue
		}
		var sx, sm float64
		mn, mx, cnt := math.Inf(1), math.Inf(-1), 0
		for i := lo; i < hi; i++ {
			sx += b.X[i]
			sm += b.Mean[i]
			mn, mx = math.Min(mn, b.Lo[i]), math.Max(mx, b.Hi[i])
			cnt = max(cnt, b.N[i])
		}
		w := float64(hi - lo)
		o.X = append(o.X, sx/w)
		o.Mean = append(o.Mean, sm/w)
		o.Lo = append(o.Lo, mn)
		o.Hi = append(o.Hi, mx)
		o.N = append(o.N, cnt)
	}
	return o
}
