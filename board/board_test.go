package board

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/trainer"
)

func newServer(t testing.TB, o Options) *httptest.Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	return ts
}

// get fetches path from ts and decodes its JSON into v (nil: discard);
// it returns the status code and the body.
func get(t testing.TB, ts *httptest.Server, path string, v any) (int, string) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, body)
		}
	}
	return resp.StatusCode, string(body)
}

func q(id string) string { return url.QueryEscape(id) }

// The list finds runs and benches with their states; a bench's grid comes
// from its bench file (pending arm-seeds included), and a running
// arm-seed has its step and an ETA.
func TestListAndBenchStates(t *testing.T) {
	tmp := t.TempDir()
	finishedBench(t, filepath.Join(tmp, "done"))
	spec, running := liveBench(t, filepath.Join(tmp, "live"))
	// Standalone runs: one that reached its last step, one that stopped
	// early an hour ago, one being written now.
	finished := newRun(t, filepath.Join(tmp, "runs", "finished"), "grpo", 1)
	finished.writeTo(t, testSteps)
	finished.age(t, time.Hour)
	stopped := newRun(t, filepath.Join(tmp, "runs", "stopped"), "ppo", 1)
	stopped.writeTo(t, 12)
	stopped.age(t, time.Hour)
	fresh := newRun(t, filepath.Join(tmp, "runs", "fresh"), "ppo", 2)
	fresh.writeTo(t, 9)

	ts := newServer(t, Options{Dirs: []string{tmp}, Specs: []*bench.Spec{spec}})
	var l listing
	get(t, ts, "/api/list", &l)
	got := map[string]item{}
	for _, it := range l.Items {
		got[it.Path] = it
	}
	want := map[string]string{"done": "done", "live": "running", "runs/finished": "done", "runs/stopped": "failed", "runs/fresh": "running"}
	if len(got) != len(want) {
		t.Errorf("list: %d items, want %d: %+v", len(got), len(want), l.Items)
	}
	for p, st := range want {
		if got[p].State != st {
			t.Errorf("%s: state %q, want %q (%+v)", p, got[p].State, st, got[p])
		}
	}
	if it := got["runs/fresh"]; it.Step == nil || *it.Step != 9 || it.Total != 40 || it.ETA == nil || *it.ETA <= 0 {
		t.Errorf("a running run: %+v", it)
	}
	if c := got["live"].Counts; c["done"] != 4 || c["running"] != 1 || c["failed"] != 1 || c["pending"] != 3 || got["live"].Cells != 9 {
		t.Errorf("live bench counts %v of %d", c, got["live"].Cells)
	}
	if !got["live"].Locked {
		t.Errorf("the live bench's lock is held: %+v", got["live"])
	}

	var b benchView
	get(t, ts, "/api/bench?id="+q(got["live"].ID), &b)
	if b.Spec != "--spec live.yaml" || !reflect.DeepEqual(b.Arms, []string{"grpo", "grpo_ppl", "ppo"}) || !reflect.DeepEqual(b.Seeds, []uint64{1, 2, 3}) {
		t.Errorf("live bench: spec %q, arms %v, seeds %v", b.Spec, b.Arms, b.Seeds)
	}
	for _, c := range b.Cells {
		wantState := statePending
		switch {
		case c.Seed == 1 || c.Seed == 2 && c.Arm == "ppo":
			wantState = stateDone
		case c.Seed == 2 && c.Arm == "grpo":
			wantState = stateRunning
			if c.Step == nil || *c.Step != 15 || c.Total != testSteps || c.ETA == nil || !c.Locked {
				t.Errorf("running cell %+v", c)
			}
		case c.Seed == 2 && c.Arm == "grpo_ppl":
			wantState = stateFailed
		}
		if c.State != wantState {
			t.Errorf("%s seed %d: %s, want %s", c.Arm, c.Seed, c.State, wantState)
		}
		if c.State == statePending && c.Total != testSteps {
			t.Errorf("a pending cell's steps come from the bench file: %+v", c)
		}
	}
	if b.Verdicts == nil || b.Verdicts.Source != "live" || !b.Verdicts.Provisional || len(b.Verdicts.Rows) != 3 {
		t.Fatalf("live verdicts: %+v (%s)", b.Verdicts, b.VerdictsNote)
	}
	if v := b.Verdicts.Rows[0]; !reflect.DeepEqual(v.Seeds, []uint64{1}) || v.Verdict != "inconclusive" {
		t.Errorf("one seed finished: %+v", v)
	}
	if v := b.Verdicts.Rows[1]; !reflect.DeepEqual(v.Seeds, []uint64{1}) {
		t.Errorf("ppo vs grpo: seeds %v, want [1]", v.Seeds)
	}
	if b.Results != nil {
		t.Errorf("no results.csv yet: %+v", b.Results)
	}
	// The running arm-seed finishes: the grid and the verdicts follow.
	running.finish(t)
	get(t, ts, "/api/bench?id="+q(got["live"].ID), &b)
	if b.Counts["done"] != 5 || len(b.Verdicts.Rows[0].Seeds) != 1 || !reflect.DeepEqual(b.Verdicts.Rows[1].Seeds, []uint64{1, 2}) {
		t.Errorf("after grpo seed 2 finished: %v, %+v", b.Counts, b.Verdicts.Rows[1])
	}

	// The finished bench: results.csv as written, verdicts.json final,
	// pass@k of every arm.
	get(t, ts, "/api/bench?id="+q(got["done"].ID), &b)
	if b.State != stateDone || b.Results == nil || b.Results.Provisional || b.Verdicts == nil || b.Verdicts.Source != bench.VerdictsFile || b.Verdicts.Provisional {
		t.Fatalf("finished bench: %+v %+v %+v", b.gridView, b.Results, b.Verdicts)
	}
	if b.Spec != "the directories found" {
		// done.yaml is neither given nor shipped: the grid is what exists.
		t.Errorf("finished bench's grid from %q", b.Spec)
	}
	if !reflect.DeepEqual(b.PassSets, []string{"mean", "l1", "l2"}) || len(b.PassK) != 3 || !reflect.DeepEqual(b.PassK[0].Sets["mean"].K, []int{1, 2, 4}) {
		t.Errorf("pass@k: sets %v, %+v", b.PassSets, b.PassK)
	}
	// pass@k: mean, lowest and highest over seeds of the final values.
	var finals []float64
	for _, seed := range []uint64{1, 2, 3} {
		last, _, _ := lastValues(t, filepath.Join(tmp, "done", "runs", "grpo", fmt.Sprintf("seed-%d", seed), "metrics.jsonl"))
		finals = append(finals, last["val/l2/pass@2"])
	}
	pc := b.PassK[0].Sets["l2"]
	if math.Abs(pc.Mean[1]-(finals[0]+finals[1]+finals[2])/3) > 1e-12 || pc.Lo[1] != slices.Min(finals) || pc.Hi[1] != slices.Max(finals) {
		t.Errorf("grpo l2 pass@2: %+v, finals %v", pc, finals)
	}
}

// The band of a bench's curve: per step, the mean, lowest and highest over
// the seeds, from the runs' own values.
func TestBenchSeries(t *testing.T) {
	tmp := t.TempDir()
	finishedBench(t, tmp)
	ts := newServer(t, Options{Dirs: []string{tmp}})
	var out struct {
		Series map[string][]bandOut `json:"series"`
	}
	get(t, ts, "/api/bench/series?id=0/.&m=reward/acc&m=val/mean/avg@4&m=no/such", &out)
	if len(out.Series["reward/acc"]) != 3 || len(out.Series["val/mean/avg@4"]) != 3 || out.Series["no/such"] != nil {
		t.Fatalf("series: %v", out.Series)
	}
	b := out.Series["reward/acc"][1]
	if b.Arm != "grpo_ppl" || len(b.X) != testSteps {
		t.Fatalf("grpo_ppl reward/acc: %+v", b)
	}
	var ys []float64
	for _, seed := range []uint64{1, 2, 3} {
		ys = append(ys, testRow("grpo_ppl", seed, 17)["reward/acc"].(float64))
	}
	if b.X[17] != 17 || math.Abs(b.Mean[17]-(ys[0]+ys[1]+ys[2])/3) > 1e-12 || b.Lo[17] != slices.Min(ys) || b.Hi[17] != slices.Max(ys) || b.N[17] != 3 {
		t.Errorf("step 17: x %v mean %v lo %v hi %v n %v; seeds %v", b.X[17], b.Mean[17], b.Lo[17], b.Hi[17], b.N[17], ys)
	}
	// Thinned to the points asked for.
	get(t, ts, "/api/bench/series?id=0/.&m=reward/acc&points=10", &out)
	if b := out.Series["reward/acc"][0]; len(b.X) != 10 {
		t.Errorf("points=10: %d points", len(b.X))
	}
}

// A run's series: every value as logged, the last point exact; a file that
// grows is read from where it stopped; one rewritten shorter (a resume
// dropping rows) is read again.
func TestRunSeriesIncremental(t *testing.T) {
	tmp := t.TempDir()
	run := &armSeed{dir: filepath.Join(tmp, "r"), arm: "grpo", seed: 1}
	os.MkdirAll(run.dir, 0o755)
	run.writeTo(t, 9)
	// A torn last line (a writer mid-row) is not read yet.
	line, _ := json.Marshal(testRow("grpo", 1, 10))
	cut := len(line) / 2
	appendTo := func(b []byte) {
		f, _ := os.OpenFile(filepath.Join(run.dir, "metrics.jsonl"), os.O_APPEND|os.O_WRONLY, 0o644)
		f.Write(b)
		f.Close()
	}
	appendTo(line[:cut])
	ts := newServer(t, Options{Dirs: []string{tmp}})
	type resp struct {
		Rows     int                   `json:"rows"`
		LastStep float64               `json:"last_step"`
		Series   map[string]*seriesOut `json:"series"`
	}
	var r resp
	get(t, ts, "/api/series?id=0/r&m=reward/acc&m=val/l1/pass@4&m=calib/ppl_correct", &r)
	if r.Rows != 10 || r.LastStep != 9 || len(r.Series["reward/acc"].X) != 10 || r.Series["calib/ppl_correct"] != nil {
		t.Fatalf("before growing: %+v", r)
	}
	if got := r.Series["reward/acc"]; got.LastY != testRow("grpo", 1, 9)["reward/acc"] || got.Y[3] != testRow("grpo", 1, 3)["reward/acc"] {
		t.Errorf("values: %+v", got)
	}
	if got := r.Series["val/l1/pass@4"]; !reflect.DeepEqual(got.X, []float64{0}) {
		t.Errorf("eval metric at steps %v, want [0]", got.X)
	}
	// The line is finished, and the run goes on.
	appendTo(append(line[cut:], '\n'))
	run.next = 11
	run.writeTo(t, 25)
	get(t, ts, "/api/series?id=0/r&m=reward/acc&m=val/l1/pass@4", &r)
	if r.Rows != 26 || r.LastStep != 25 || len(r.Series["reward/acc"].X) != 26 || !reflect.DeepEqual(r.Series["val/l1/pass@4"].X, []float64{0, 20}) {
		t.Fatalf("after growing: rows %d last %v, %d acc points, pass@4 at %v", r.Rows, r.LastStep, len(r.Series["reward/acc"].X), r.Series["val/l1/pass@4"].X)
	}
	// A resume drops the rows after its checkpoint (step 14), then goes on.
	run2 := &armSeed{dir: run.dir, arm: "grpo", seed: 1}
	os.Remove(filepath.Join(run.dir, "metrics.jsonl"))
	run2.writeTo(t, 14)
	get(t, ts, "/api/series?id=0/r&m=reward/acc", &r)
	if r.Rows != 15 || r.LastStep != 14 {
		t.Fatalf("after the rewrite: rows %d, last %v", r.Rows, r.LastStep)
	}
	// Rewritten in place to a longer file: noticed by its changed tail.
	other := &armSeed{dir: filepath.Join(tmp, "o"), arm: "ppo", seed: 7}
	os.MkdirAll(other.dir, 0o755)
	other.writeTo(t, 30)
	data, _ := os.ReadFile(filepath.Join(other.dir, "metrics.jsonl"))
	mf, _ := os.OpenFile(filepath.Join(run.dir, "metrics.jsonl"), os.O_WRONLY|os.O_TRUNC, 0o644)
	mf.Write(data)
	mf.Close()
	get(t, ts, "/api/series?id=0/r&m=reward/acc", &r)
	if r.Rows != 31 || r.Series["reward/acc"].Y[0] != testRow("ppo", 7, 0)["reward/acc"] {
		t.Fatalf("after an in-place rewrite: rows %d, first %v", r.Rows, r.Series["reward/acc"].Y[0])
	}
}

// parseRow's hand scanner agrees with encoding/json, and falls back to it
// on what it does not scan.
func TestParseRow(t *testing.T) {
	for _, line := range []string{
		`{"step":3,"a/b":0.5,"c":-1.25e-3,"d":null,"e":12}`,
		` { "step" : 1 , "x" : 2E+2 } `,
		`{"step":1,"esc\"aped":3,"u\u00e9":4}`,
		`{"step":1,"nested":{"a":1},"s":"text","t":true,"n":5}`,
		`{}`,
	} {
		got := map[string]float64{}
		for _, e := range parseRow([]byte(line), nil) {
			got[e.key] = e.v
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{}
		for k, v := range raw {
			if f, ok := v.(float64); ok {
				want[k] = f
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", line, got, want)
		}
	}
	for _, bad := range []string{``, `{"step":1,"a":`, `[1,2]`, `{"step":1 "a":2}`, `{"step":1,"a":1.2.3}`} {
		if kv := parseRow([]byte(bad), nil); kv != nil {
			t.Errorf("%q: got %v, want nil", bad, kv)
		}
	}
}

// Decimation keeps the first and last points and every bucket's extremes.
func TestDecimate(t *testing.T) {
	n := 10000
	x := make([]float64, n)
	y := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
		y[i] = math.Sin(float64(i) / 50)
	}
	y[4321] = 9 // a spike
	y[777] = -9
	dx, dy := decimate(x, y, 2000)
	if len(dx) > 2000 || dx[0] != 0 || dx[len(dx)-1] != float64(n-1) || !slices.IsSorted(dx) {
		t.Fatalf("%d points, first %v, last %v", len(dx), dx[0], dx[len(dx)-1])
	}
	if slices.Max(dy) != 9 || slices.Min(dy) != -9 {
		t.Errorf("spikes lost: max %v min %v", slices.Max(dy), slices.Min(dy))
	}
	if sx, _ := decimate(x[:100], y[:100], 2000); len(sx) != 100 {
		t.Errorf("a short series is sent whole: %d", len(sx))
	}
}

// bench.Verdicts judges as the report does: on a finished bench it gives
// verdicts.json's entries exactly.
func TestLiveVerdictsMatchReport(t *testing.T) {
	tmp := t.TempDir()
	spec := finishedBench(t, tmp)
	data, err := os.ReadFile(filepath.Join(tmp, bench.VerdictsFile))
	if err != nil {
		t.Fatal(err)
	}
	var file []bench.ClaimVerdict
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	live, missing, err := bench.Verdicts(spec, tmp)
	if err != nil || len(missing) != 0 {
		t.Fatal(err, missing)
	}
	a, _ := json.Marshal(file)
	b, _ := json.Marshal(live)
	if string(a) != string(b) || len(live) != 3 {
		t.Errorf("live verdicts differ from verdicts.json:\n%s\n%s", a, b)
	}
	// With one arm-seed's DONE gone, that seed is out of the claims
	// touching its arm, and it is listed as missing.
	os.Remove(filepath.Join(bench.RunDir(tmp, "grpo", 3), bench.DoneFile))
	live, missing, err = bench.Verdicts(spec, tmp)
	if err != nil || !reflect.DeepEqual(missing, []string{"grpo seed 3"}) || !reflect.DeepEqual(live[0].Seeds, []uint64{1, 2}) {
		t.Errorf("without grpo seed 3: %v %v %+v", err, missing, live[0])
	}
}

// results.csv is served as the bench wrote it.
func TestResultsVerbatim(t *testing.T) {
	tmp := t.TempDir()
	finishedBench(t, tmp)
	ts := newServer(t, Options{Dirs: []string{tmp}})
	var b benchView
	get(t, ts, "/api/bench?id=0/.", &b)
	f, _ := os.Open(filepath.Join(tmp, "results.csv"))
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if b.Results == nil || !reflect.DeepEqual(append([][]string{b.Results.Header}, b.Results.Rows...), recs) {
		t.Errorf("results: %+v\nwant %v", b.Results, recs)
	}
}

func TestCommandStems(t *testing.T) {
	got := commandStems("cde-run bench -c bench/paper-countdown.yaml --out x --jobs 2\ncde-run bench --config=my.yml\nsmoke --jobs 2\ncde-run bench -c 'quick'\n")
	if want := []string{"paper-countdown", "my", "quick"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A shipped preset named in commands.txt gives the grid; one that does
// not hold the arms found is not used.
func TestPresetFromCommands(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "b")
	os.MkdirAll(bench.RunDir(dir, "grpo_simhash", 1), 0o755)
	os.WriteFile(filepath.Join(dir, "commands.txt"), []byte("cde-run bench -c smoke --out b\n"), 0o644)
	ts := newServer(t, Options{Dirs: []string{tmp}})
	var b benchView
	get(t, ts, "/api/bench?id=0/b", &b)
	if !strings.HasPrefix(b.Spec, "preset smoke") || len(b.Cells) != 4 || b.Counts[statePending] != 4 {
		t.Errorf("smoke preset: %q, %d cells, %v", b.Spec, len(b.Cells), b.Counts)
	}
	os.MkdirAll(bench.RunDir(dir, "not_in_smoke", 1), 0o755)
	get(t, ts, "/api/bench?id=0/b", &b)
	if b.Spec != "the directories found" || !strings.Contains(b.Note, "it has no arm not_in_smoke") || len(b.Cells) != 2 {
		t.Errorf("a preset that does not fit: %q %q, %d cells", b.Spec, b.Note, len(b.Cells))
	}
}

// Nothing outside the named directories is served: not by dot-dot, not by
// an absolute path, not through a symbolic link (a run, a metrics file or
// an arm-seed that points out); the server is read-only and answers only
// requests addressed to loopback.
func TestNoPathEscapes(t *testing.T) {
	tmp := t.TempDir()
	served := filepath.Join(tmp, "served")
	outside := filepath.Join(tmp, "outside")
	// A run outside, whose values must never be sent.
	secret := &armSeed{dir: filepath.Join(outside, "secret"), arm: "grpo", seed: 1}
	os.MkdirAll(secret.dir, 0o755)
	os.WriteFile(filepath.Join(secret.dir, "metrics.jsonl"), []byte(`{"step":0,"secret/marker":4242.5}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(secret.dir, "results.csv"), []byte("arm,seeds\nsecretarm,1\n"), 0o644)
	// Served: a real run, a link to the outside run, a run whose
	// metrics.jsonl links out, and a bench with an arm-seed linking out.
	ok := &armSeed{dir: filepath.Join(served, "ok"), arm: "grpo", seed: 1}
	os.MkdirAll(ok.dir, 0o755)
	ok.writeTo(t, 3)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret.dir, filepath.Join(served, "linkrun")))
	os.MkdirAll(filepath.Join(served, "linkfile"), 0o755)
	must(os.Symlink(filepath.Join(secret.dir, "metrics.jsonl"), filepath.Join(served, "linkfile", "metrics.jsonl")))
	rel, _ := filepath.Rel(filepath.Join(served, "linkrel"), filepath.Join(secret.dir, "metrics.jsonl"))
	os.MkdirAll(filepath.Join(served, "linkrel"), 0o755)
	must(os.Symlink(rel, filepath.Join(served, "linkrel", "metrics.jsonl"))) // relative, ../../outside/...
	spec := testSpec(t, "b.yaml")
	b := filepath.Join(served, "b")
	for _, arm := range spec.Arms {
		newArmSeed(t, b, arm.Name, 1).finish(t)
	}
	must(os.Symlink(secret.dir, bench.RunDir(b, "grpo", 2)))
	must(os.Symlink(filepath.Join(secret.dir, "results.csv"), filepath.Join(b, "results.csv")))
	os.WriteFile(filepath.Join(b, "commands.txt"), []byte("cde-run bench -c b.yaml\n"), 0o644)

	ts := newServer(t, Options{Dirs: []string{served}, Specs: []*bench.Spec{spec}})
	var bodies []string
	check := func(path string, want int) {
		t.Helper()
		code, body := get(t, ts, path, nil)
		bodies = append(bodies, body)
		if code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
	for _, id := range []string{"0/..", "0/../outside/secret", "0/ok/../../outside/secret", "0//etc", "0/" + secret.dir, "0/./ok", "0/ok/", "1/ok", "-1/ok", "00/ok", "x/ok", "ok", "0/ok\\..\\..", ""} {
		for _, ep := range []string{"/api/run?id=", "/api/series?m=secret/marker&id=", "/api/bench?id=", "/api/bench/series?m=secret/marker&id="} {
			check(ep+q(id), http.StatusBadRequest)
		}
	}
	for _, id := range []string{"0/linkrun", "0/linkfile", "0/linkrel", "0/b/runs/grpo/seed-2", "0/nothere"} {
		code, body := get(t, ts, "/api/series?m=secret/marker&id="+q(id), nil)
		bodies = append(bodies, body)
		if code == http.StatusOK && strings.Contains(body, "4242") {
			t.Errorf("%s: the outside run's values were served: %s", id, body)
		}
		code, body = get(t, ts, "/api/run?id="+q(id), nil)
		bodies = append(bodies, body)
		if code == http.StatusOK && strings.Contains(body, "secret") {
			t.Errorf("%s: the outside run was served: %s", id, body)
		}
	}
	check("/api/series?m=reward/acc&id=0/ok", http.StatusOK)
	var l listing
	get(t, ts, "/api/list", &l)
	var paths []string
	for _, it := range l.Items {
		paths = append(paths, it.Path)
	}
	if want := []string{"b", "linkfile", "linkrel", "ok"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("listed %v, want %v (links to directories are not followed)", paths, want)
	}
	var bv benchView
	get(t, ts, "/api/bench?id=0/b", &bv)
	if bv.Results != nil {
		t.Errorf("results.csv linking out was served: %+v", bv.Results)
	}
	if bv.Verdicts != nil || !strings.Contains(bv.VerdictsNote, "symbolic link under the bench leaves the directory") {
		t.Errorf("live verdicts with a link leading out: %+v %q", bv.Verdicts, bv.VerdictsNote)
	}
	code, body := get(t, ts, "/api/bench/series?m=secret/marker&id=0/b", nil)
	bodies = append(bodies, body)
	if code != http.StatusOK || strings.Contains(body, "4242") {
		t.Errorf("bench series: %d %s", code, body)
	}
	// Static files: only the embedded assets.
	for _, p := range []string{"/../board.go", "/%2e%2e/board.go", "/assets/../board.go", "/..%2fboard.go", "/board.go"} {
		code, body := get(t, ts, p, nil)
		bodies = append(bodies, body)
		if code == http.StatusOK && strings.Contains(body, "package board") {
			t.Errorf("GET %s served a source file", p)
		}
	}
	for _, body := range bodies {
		if strings.Contains(body, "4242") || strings.Contains(body, "secretarm") {
			t.Fatalf("a response holds the outside files' content: %s", body)
		}
	}
	// Read-only.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, ts.URL+"/api/list", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
	// A page that rebinds its own name to 127.0.0.1 gets nothing.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/list", nil)
	req.Host = "attacker.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", resp.StatusCode)
	}
	for _, h := range []string{"localhost:6006", "127.0.0.1", "[::1]:6006"} {
		req.Host = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d", h, resp.StatusCode)
		}
	}
}

// The page and its assets come from the binary, with a policy that lets
// it load nothing from elsewhere.
func TestAssetsEmbedded(t *testing.T) {
	ts := newServer(t, Options{Dirs: []string{t.TempDir()}})
	for _, p := range []string{"/", "/app.js", "/style.css"} {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) < 100 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: %d, %d bytes, CSP %q", p, resp.StatusCode, len(body), resp.Header.Get("Content-Security-Policy"))
		}
		if strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://") {
			t.Errorf("%s names another site", p)
		}
	}
}

// Several pages polling at once while a run grows (run with -race).
func TestConcurrentPolls(t *testing.T) {
	tmp := t.TempDir()
	spec, running := liveBench(t, filepath.Join(tmp, "live"))
	ts := newServer(t, Options{Dirs: []string{tmp}, Specs: []*bench.Spec{spec}})
	done := make(chan struct{})
	errs := make(chan error, 8)
	for i := range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				for _, p := range []string{"/api/list", "/api/bench?id=0/live", "/api/bench/series?id=0/live&m=reward/acc",
					"/api/series?id=0/live/runs/grpo/seed-2&m=reward/acc", "/api/run?id=0/live/runs/grpo/seed-2"} {
					resp, err := http.Get(ts.URL + p)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						errs <- fmt.Errorf("poller %d: %s: %v", i, p, err)
						return
					}
				}
			}
		}()
	}
	for s := 16; s <= testSteps; s += 4 {
		running.writeTo(t, s)
		time.Sleep(20 * time.Millisecond)
	}
	running.finish(t)
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var r struct {
		LastStep float64 `json:"last_step"`
	}
	get(t, ts, "/api/series?id=0/live/runs/grpo/seed-2&m=reward/acc", &r)
	if r.LastStep != testSteps {
		t.Errorf("last step %v after the run finished", r.LastStep)
	}
}

// fastFloat gives strconv.ParseFloat's value wherever it takes a number,
// and leaves the rest to it.
func TestFastFloat(t *testing.T) {
	cases := []string{"0", "-0", "1", "-1", "0.5", "12.345", "-0.8414709848078965", "1e10", "1.5e-7", "2.5E+3", "123456789012345",
		"0.1", "0.2", "0.30000000000000004", "9007199254740993", "1e23", "1e-30", "5e-324", "1.7976931348623157e308", "0.000001234",
		"100000000000000000000000", "3.141592653589793", "+7", "00012", "1.", ".5"}
	for i := range 20000 {
		v := math.Sin(float64(i)*0.37) * math.Pow(10, float64(i%40-20))
		cases = append(cases, strconv.FormatFloat(v, 'g', -1, 64), strconv.FormatFloat(v, 'f', -1, 64), strconv.FormatFloat(v, 'e', 6, 64))
	}
	fast := 0
	for _, c := range cases {
		want, err := strconv.ParseFloat(c, 64)
		got, ok := fastFloat([]byte(c))
		if !ok {
			continue
		}
		fast++
		if err != nil || got != want || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("fastFloat(%q) = %v, ParseFloat %v (%v)", c, got, want, err)
		}
	}
	for _, bad := range []string{"", "-", ".", "e5", "1e", "1..2", "1-2", "--1", "0x10", "1e5e5"} {
		if v, ok := fastFloat([]byte(bad)); ok {
			t.Errorf("fastFloat(%q) = %v, want not ok", bad, v)
		}
	}
	if fast < len(cases)/2 {
		t.Errorf("only %d of %d numbers took the fast path", fast, len(cases))
	}
}

// A run whose trainer dies is failed as soon as its lock is released, not
// when its metrics.jsonl goes stale; an arm-seed shows the reason the
// bench recorded (bench.FailedFile) and the command that resumes it.
func TestKilledRunFailsAtOnce(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "b")
	spec := testSpec(t, "b.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "commands.txt"), []byte("cde-run bench -c b.yaml --out b\ncde-run bench -c b.yaml --out b --report-only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	killed := newArmSeed(t, dir, "grpo", 1)
	killed.hold(t)
	killed.writeTo(t, 19)
	recorded := newArmSeed(t, dir, "ppo", 1)
	recorded.hold(t)
	recorded.writeTo(t, 5)
	run := newRun(t, filepath.Join(tmp, "runs", "r"), "grpo", 1)
	run.hold(t)
	run.writeTo(t, 9)
	os.MkdirAll(filepath.Join(run.dir, "checkpoints"), 0o755)
	ts := newServer(t, Options{Dirs: []string{tmp}, Specs: []*bench.Spec{spec}})
	cells := func() map[string]cell {
		var b benchView
		get(t, ts, "/api/bench?id=0/b", &b)
		out := map[string]cell{}
		for _, c := range b.Cells {
			out[fmt.Sprintf("%s/%d", c.Arm, c.Seed)] = c
		}
		return out
	}
	var r runView
	get(t, ts, "/api/run?id=0/runs/r", &r)
	if c := cells(); c["grpo/1"].State != stateRunning || c["ppo/1"].State != stateRunning || r.State != stateRunning {
		t.Fatalf("while the locks are held: %+v %+v %+v", c["grpo/1"], c["ppo/1"], r.runState)
	}
	// All three die now, their metrics.jsonl fresh; the bench recorded
	// why ppo seed 1 stopped.
	killed.unlock()
	run.unlock()
	recorded.unlock()
	rec := `{"failed":"2026-11-28T10:00:00Z","error":"exit status 1: the loss is NaN at step 5","command":"cde-run bench -c b.yaml --out b --jobs 2"}`
	if err := os.WriteFile(filepath.Join(recorded.dir, bench.FailedFile), []byte(rec+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // /proc/locks is read at most once a second
	c := cells()
	if k := c["grpo/1"]; k.State != stateFailed || k.ETA != nil || k.Failure == nil || !k.Failure.Released || k.Failure.Reason != "" || k.Failure.Resume != "cde-run bench -c b.yaml --out b" {
		t.Errorf("killed arm-seed: %+v %+v", k, k.Failure)
	}
	if k := c["ppo/1"]; k.State != stateFailed || k.Failure == nil || k.Failure.Reason != "exit status 1: the loss is NaN at step 5" || k.Failure.Resume != "cde-run bench -c b.yaml --out b --jobs 2" || k.Failure.At != "2026-11-28T10:00:00Z" {
		t.Errorf("arm-seed with its reason recorded: %+v %+v", k, k.Failure)
	}
	get(t, ts, "/api/run?id=0/runs/r", &r)
	if r.State != stateFailed || r.Failure == nil || r.Failure.Resume != "cde-run train --resume "+filepath.Join(tmp, "runs", "r") {
		t.Errorf("killed run: %+v %+v", r.runState, r.Failure)
	}
}

// Lines of metrics.jsonl that are not metrics rows are counted, with
// their line numbers, whether the file is read at once in parallel or as
// it grows; the rows around them are kept.
func TestCorruptLinesCounted(t *testing.T) {
	tmp := t.TempDir()
	run := filepath.Join(tmp, "r")
	writeBigRun(t, run, 0, 3000, 60) // over parallelMin: read in parts
	f, _ := os.OpenFile(filepath.Join(run, "metrics.jsonl"), os.O_APPEND|os.O_WRONLY, 0o644)
	f.WriteString("{\"step\":3000,\"a\":1{\"step\":3001\n\n[1,2]\n{\"a\":2}\n{\"step\":3002,\"a\":3}\n")
	f.Close()
	fi, _ := os.Stat(filepath.Join(run, "metrics.jsonl"))
	if fi.Size() < parallelMin {
		t.Fatalf("%d bytes: under parallelMin", fi.Size())
	}
	ts := newServer(t, Options{Dirs: []string{tmp}})
	var r runView
	get(t, ts, "/api/run?id=0/r", &r)
	if r.Rows != 3001 || r.Corrupt != 3 || !reflect.DeepEqual(r.CorruptLines, []int{3001, 3003, 3004}) {
		t.Errorf("parallel read: %d rows, %d corrupt at %v", r.Rows, r.Corrupt, r.CorruptLines)
	}
	// The same from a file read as it grows, line by line.
	seq := &runCache{}
	root, _ := os.OpenRoot(tmp)
	defer root.Close()
	data, _ := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	os.MkdirAll(filepath.Join(tmp, "s"), 0o755)
	for i, chunk := range [][]byte{data[:len(data)/3], data[len(data)/3 : len(data)*2/3], data[len(data)*2/3:]} {
		fl, _ := os.OpenFile(filepath.Join(tmp, "s", "metrics.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fl.Write(chunk)
		fl.Close()
		if i == 0 {
			// a small first read: line by line
			if err := seq.update(root, filepath.Join("s", "metrics.jsonl")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := seq.update(root, filepath.Join("s", "metrics.jsonl")); err != nil {
		t.Fatal(err)
	}
	par := &runCache{}
	if err := par.update(root, filepath.Join("r", "metrics.jsonl")); err != nil {
		t.Fatal(err)
	}
	if seq.rows != par.rows || seq.bad != par.bad || !reflect.DeepEqual(seq.badLines, par.badLines) || len(seq.metrics) != len(par.metrics) || seq.last != par.last {
		t.Errorf("sequential: %d rows %d bad %v; parallel: %d rows %d bad %v", seq.rows, seq.bad, seq.badLines, par.rows, par.bad, par.badLines)
	}
	for k, s := range par.metrics {
		if q := seq.metrics[k]; q == nil || !slices.Equal(q.x, s.x) || !slices.Equal(q.y, s.y) {
			t.Errorf("%s differs between the parallel and the sequential read", k)
		}
	}
	if a := par.metrics["a"]; a == nil || !slices.Equal(a.x, []float64{3002}) {
		t.Errorf("the row after the corrupt lines: %+v", a)
	}
}

// Once a bench has exited (its lock released) with arm-seeds failed, its
// report is final, not provisional, and its curves, like its report, leave
// the failed arm-seeds out (a per-seed view shows them).
func TestExitedBenchFinal(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "x")
	spec := testSpec(t, "x.yaml")
	lock, err := trainer.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	os.WriteFile(filepath.Join(dir, "commands.txt"), []byte("cde-run bench -c x.yaml --out x\n"), 0o644)
	for _, seed := range spec.Seeds {
		for _, arm := range spec.Arms {
			a := newArmSeed(t, dir, arm.Name, seed)
			if arm.Name == "grpo_ppl" && seed == 3 {
				a.writeTo(t, 7)
				a.age(t, time.Hour)
				continue
			}
			a.finish(t)
		}
	}
	if err := bench.Report(spec, bench.Options{Dir: dir, Command: "cde-run bench -c x.yaml --out x", Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, Options{Dirs: []string{tmp}, Specs: []*bench.Spec{spec}})
	var b benchView
	get(t, ts, "/api/bench?id=0/x", &b)
	if b.State != stateRunning || b.Exited || b.Results == nil || !b.Results.Provisional || b.Verdicts == nil || !b.Verdicts.Provisional {
		t.Errorf("while the bench holds its lock: %s exited %v, %+v %+v", b.State, b.Exited, b.Results, b.Verdicts)
	}
	lock.Close()
	time.Sleep(1100 * time.Millisecond)
	get(t, ts, "/api/bench?id=0/x", &b)
	if b.State != stateFailed || !b.Exited || b.Results == nil || b.Results.Provisional || !strings.Contains(b.Results.Note, "1 failed") {
		t.Errorf("after the bench exited: %s exited %v, results %+v", b.State, b.Exited, b.Results)
	}
	if b.Verdicts == nil || b.Verdicts.Provisional || b.Verdicts.Source != bench.VerdictsFile || !strings.Contains(b.Verdicts.Note, "finished ones only") {
		t.Errorf("verdicts after the bench exited: %+v", b.Verdicts)
	}
	var out struct {
		Series map[string][]bandOut `json:"series"`
		Seeds  map[string][]seedOut `json:"seeds"`
	}
	get(t, ts, "/api/bench/series?id=0/x&m=reward/acc&seeds=1", &out)
	for _, band := range out.Series["reward/acc"] {
		want := 3
		if band.Arm == "grpo_ppl" {
			want = 2 // the failed seed is left out, at its steps too
		}
		if band.N[3] != want {
			t.Errorf("%s at step 3: %d seeds, want %d", band.Arm, band.N[3], want)
		}
	}
	failed := 0
	for _, s := range out.Seeds["reward/acc"] {
		if s.State == stateFailed {
			failed++
			if s.Arm != "grpo_ppl" || s.Seed != 3 || len(s.X) != 8 {
				t.Errorf("failed seed's series: %+v", s)
			}
		}
	}
	if len(out.Seeds["reward/acc"]) != 9 || failed != 1 {
		t.Errorf("per seed: %d series, %d failed", len(out.Seeds["reward/acc"]), failed)
	}
}
