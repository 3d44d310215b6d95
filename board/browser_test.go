package board

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/cde-rl/cde/bench"
	"github.com/cde-rl/cde/internal/resultstest"
)

// chromium is the headless browser the page is tested in: Debian's
// chromium (.ci/run installs it), or another Chrome on PATH.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// page drives one tab of the browser.
type page struct {
	t   *testing.T
	ctx context.Context
	ts  *httptest.Server
	out string // where screenshots go
}

// eval runs JavaScript that returns a JSON string and decodes it into v.
func (p *page) eval(js string, v any) {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`JSON.stringify(`+js+`)`))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		p.t.Fatalf("evaluate %s: %v: %s", js, err, s)
	}
}

// wait polls until the JavaScript expression is true.
func (p *page) wait(what, js string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		var state string
		s, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.dataset.ready + " | " + document.getElementById("live").textContent`))
		state = s
		p.t.Fatalf("waiting for %s: %v (page: %s)", what, err, state)
	}
}

// open shows the view of hash (without reloading the page) and waits
// until it is drawn.
func (p *page) open(hash, ready string) {
	p.t.Helper()
	h, _ := json.Marshal(hash)
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.body.dataset.ready = ""; location.hash = `+string(h)+`; true`)); err != nil {
		p.t.Fatal(err)
	}
	r, _ := json.Marshal(ready)
	p.wait(hash, `(document.body.dataset.ready || "").startsWith(`+string(r)+`)`)
}

// shot saves a screenshot of the whole page as name and checks it is a
// PNG of the page's size.
func (p *page) shot(name string) {
	p.t.Helper()
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil || img.Bounds().Dx() < 800 || img.Bounds().Dy() < 400 {
		p.t.Fatalf("screenshot %s: %v, %v", name, err, img.Bounds())
	}
	if err := os.WriteFile(filepath.Join(p.out, name), buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

type domCell struct {
	Arm, Seed, State, Step, Shown string
}

func (p *page) grid() map[string]domCell {
	var cells []domCell
	p.eval(`[...document.querySelectorAll("#grid td.cell")].map(td => ({Arm: td.dataset.arm, Seed: td.dataset.seed, State: td.dataset.state,
		Step: td.dataset.step, Shown: (td.querySelector(".step") || {}).textContent || ""}))`, &cells)
	out := map[string]domCell{}
	for _, c := range cells {
		out[c.Arm+"/"+c.Seed] = c
	}
	return out
}

// checkResults compares the results table on the page with results.csv,
// cell by cell.
func (p *page) checkResults(csvPath string) {
	p.t.Helper()
	f, err := os.Open(csvPath)
	if err != nil {
		p.t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		p.t.Fatal(err)
	}
	type domRow struct {
		Arm, Seeds string
		Cells      []struct{ Col, Mean, Std, Text string }
	}
	var rows []domRow
	p.eval(`[...document.querySelectorAll("#results tr[data-arm]")].map(tr => ({Arm: tr.children[0].textContent, Seeds: tr.querySelector(".seeds").textContent,
		Cells: [...tr.querySelectorAll("td[data-col]")].map(td => ({Col: td.dataset.col, Mean: (td.querySelector(".mean") || {}).textContent || "",
			Std: (td.querySelector(".std") || {}).textContent || "", Text: td.textContent}))}))`, &rows)
	if len(rows) != len(recs)-1 {
		p.t.Fatalf("%s: %d rows on the page, %d in the file", csvPath, len(rows), len(recs)-1)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	checked := 0
	for i, r := range rows {
		rec := recs[i+1]
		if r.Arm != rec[0] || r.Seeds != rec[1] {
			p.t.Errorf("row %d: %s %s on the page, %s %s in the file", i, r.Arm, r.Seeds, rec[0], rec[1])
		}
		for _, c := range r.Cells {
			mi, ok := col[c.Col+"_mean"]
			if !ok {
				p.t.Errorf("column %s is not in the file", c.Col)
				continue
			}
			if c.Mean != rec[mi] || c.Std != rec[col[c.Col+"_std"]] {
				p.t.Errorf("%s %s: %q ± %q on the page, %q ± %q in the file", r.Arm, c.Col, c.Mean, c.Std, rec[mi], rec[col[c.Col+"_std"]])
			}
			if rec[mi] == "" && c.Text != "–" {
				p.t.Errorf("%s %s: %q shown for an empty cell", r.Arm, c.Col, c.Text)
			}
			checked++
		}
	}
	if checked < (len(recs)-1)*(len(recs[0])-2)/2 {
		p.t.Errorf("%s: only %d cells compared", csvPath, checked)
	}
}

type domVerdict struct {
	Claim, Seeds, D, DText, Verdict, Holm string
}

func (p *page) verdicts() []domVerdict {
	var out []domVerdict
	p.eval(`[...document.querySelectorAll("#verdicts tr[data-claim]")].map(tr => ({Claim: tr.dataset.claim, Seeds: tr.querySelector(".seeds").textContent,
		D: tr.querySelector(".v-d").dataset.value, DText: tr.querySelector(".v-d").textContent, Verdict: tr.querySelector(".v-verdict").textContent,
		Holm: tr.querySelector(".v-holm").textContent}))`, &out)
	return out
}

func (p *page) text(sel string) string {
	var s string
	p.eval(`(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ""`, &s)
	return s
}

// sig is v at n significant digits, as the page shows it.
func sig(v float64, n int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', n, 64), 64)
	return f
}

func shownEquals(text string, v float64, digits int) bool {
	f, err := strconv.ParseFloat(text, 64)
	return err == nil && math.Abs(f-sig(v, digits)) <= 1e-12*math.Max(1, math.Abs(v))
}

// mouse sends a mouse event at (x, y) in CSS pixels of the viewport.
func (p *page) mouse(typ input.DispatchMouseEventType, x, y float64, opts ...chromedp.MouseOption) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.MouseEvent(typ, x, y, opts...)); err != nil {
		p.t.Fatal(err)
	}
}

// plotRect scrolls chart i of a group into view and returns its plotting
// area's rectangle in the viewport.
func (p *page) plotRect(group string, i int) (r struct{ Left, Top, Width, Height float64 }) {
	p.t.Helper()
	p.eval(`(() => { const c = board.charts.filter(c => c.spec.sync === `+strconv.Quote(group)+`)[`+strconv.Itoa(i)+`];
		c.box.scrollIntoView({block: "center"}); const b = c.u.over.getBoundingClientRect();
		return {Left: b.left, Top: b.top, Width: b.width, Height: b.height}; })()`, &r)
	return r
}

type readoutValue struct{ Label, Value, Step string }

type readoutOut struct {
	Metric, Step string
	Values       []readoutValue
}

// readouts are the values shown under each chart of a group.
func (p *page) readouts(group string) []readoutOut {
	var out []readoutOut
	p.eval(`board.charts.filter(c => c.spec.sync === `+strconv.Quote(group)+`).map(c => ({Metric: c.spec.title, Step: c.box.querySelector(".readout").dataset.step || "",
		Values: [...c.box.querySelectorAll(".readout .rv")].map(r => ({Label: r.dataset.label, Value: r.dataset.value, Step: r.dataset.step}))}))`, &out)
	return out
}

// ema is the page's smoothing: TensorBoard's debiased exponential moving
// average.
func ema(y []float64, w float64) []float64 {
	out := make([]float64, len(y))
	acc := 0.0
	for i, v := range y {
		acc = acc*w + (1-w)*v
		out[i] = acc / (1 - math.Pow(w, float64(i+1)))
	}
	return out
}

// column is a metric's values in a metrics.jsonl, by step.
func column(t *testing.T, path, metric string) map[float64]float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[float64]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row map[string]*float64
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if v := row[metric]; v != nil {
			out[*row["step"]] = *v
		}
	}
	return out
}

// browser starts headless Chromium for the test, a 1360x900 window.
func browser(t *testing.T, exe string) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.DisableGPU,
		chromedp.WindowSize(1360, 900), chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestBoardBrowserBigRun times the first view of a run of 10,000 steps x
// 200 metrics (a 76 MB metrics.jsonl) in headless Chromium, from a server
// that has not read it: the page loaded, the list, the run read and four
// charts drawn. It logs the times (docs/board.md has them) and asserts
// none: the machine may be busy.
func TestBoardBrowserBigRun(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no chromium on PATH (Debian: apt-get install chromium); .ci/run installs it, so CI runs this test")
	}
	dir := t.TempDir()
	writeBigRun(t, filepath.Join(dir, "big"), 0, 10000, 200)
	ctx := browser(t, exe)
	// Chromium started, the page's own files cached: what is timed is
	// the view.
	s0, _ := New(Options{Dirs: []string{t.TempDir()}})
	ts0 := httptest.NewServer(s0)
	defer func() { ts0.Close(); s0.Close() }()
	p := &page{t: t, ctx: ctx, ts: ts0}
	if err := chromedp.Do(ctx, chromedp.Navigate(ts0.URL+"/")); err != nil {
		t.Fatal(err)
	}
	p.wait("an empty home page", `document.body.dataset.ready === "home"`)
	ms := []string{"group0/metric_0", "group1/metric_1", "group2/metric_2", "group3/metric_3"}
	for i := range 2 {
		s, err := New(Options{Dirs: []string{dir}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s)
		p.ts = ts
		began := time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/#/runs/0/big?m="+strings.Join(ms, ","))); err != nil {
			t.Fatal(err)
		}
		p.wait("the big run's view", `(document.body.dataset.ready || "").startsWith("runs 0/big ") && board.charts.length === 4`)
		first := time.Since(began)
		began = time.Now()
		if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		p.wait("the big run's view again", `(document.body.dataset.ready || "").startsWith("runs 0/big ") && board.charts.length === 4`)
		again := time.Since(began)
		var n int
		p.eval(`board.charts.reduce((n, c) => n + c.u.data[0].length, 0)`, &n)
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("try %d: first view of 10,000 steps x 200 metrics, 4 charts (%d points): %s; reloaded: %s; load average %s", i+1, n,
			first.Round(time.Millisecond), again.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
		ts.Close()
		s.Close()
	}
}

// TestBoardBrowser opens the board in headless Chromium: a finished bench
// (runs and report written by the test with package bench), a bench being
// trained (rows appended, an arm-seed finishing while the page is open),
// runs overlaid, and the committed paper-countdown bench. The numbers in
// the DOM must be those of results.csv, verdicts.json and metrics.jsonl,
// and the page must follow the files without reloading. Screenshots go to
// $CDE_BOARD_SCREENSHOTS when set (docs/board/ holds the committed ones),
// else to a temporary directory.
func TestBoardBrowser(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no chromium on PATH (Debian: apt-get install chromium); .ci/run installs it, so CI runs this test")
	}
	began := time.Now()
	out := os.Getenv("CDE_BOARD_SCREENSHOTS")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ = filepath.Abs(out)
	// The committed report with its packed runs unpacked.
	countdown := resultstest.Unpack(t, filepath.Join("..", "docs", "results", "paper-countdown"))
	// The page shows the directories as given: relative names, so the
	// screenshots show no path of this machine.
	tmp := t.TempDir()
	t.Chdir(tmp)
	if err := os.Symlink(countdown, "paper-countdown"); err != nil {
		t.Fatal(err)
	}
	doneSpec := finishedBench(t, filepath.Join("benches", "done"))
	spec, running := liveBench(t, filepath.Join("benches", "live"))
	s, err := New(Options{Dirs: []string{"benches", "paper-countdown"}, Specs: []*bench.Spec{spec, doneSpec}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer func() { ts.Close(); s.Close() }()

	ctx := browser(t, exe)
	p := &page{t: t, ctx: ctx, ts: ts, out: out}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900), chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	p.wait("the home page", `document.body.dataset.ready === "home"`)
	var listed int
	p.eval(`document.querySelectorAll("#benches li[data-id]").length`, &listed)
	if listed != 3 {
		t.Errorf("%d benches in the side bar, want 3 (done, live, paper-countdown)", listed)
	}
	// A marker that a reload would wipe.
	chromedp.Run(ctx, chromedp.Evaluate[bool](`window.boardTestMarker = 42; true`))

	// The finished bench.
	p.open("#/bench/"+url.PathEscape("0/done"), "bench 0/done ")
	cells := p.grid()
	if len(cells) != 9 {
		t.Errorf("finished bench: %d cells, want 9", len(cells))
	}
	for key, c := range cells {
		_, _, step := lastValues(t, filepath.Join("benches", "done", "runs", c.Arm, "seed-"+c.Seed, "metrics.jsonl"))
		if c.State != "done" || c.Step != fmt.Sprint(step) || c.Shown != fmt.Sprint(step) {
			t.Errorf("finished bench, %s: %+v, want done at step %v", key, c, step)
		}
	}
	p.checkResults(filepath.Join("benches", "done", "results.csv"))
	var file []bench.ClaimVerdict
	data, _ := os.ReadFile(filepath.Join("benches", "done", bench.VerdictsFile))
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	vs := p.verdicts()
	if len(vs) != len(file) || len(file) != 3 {
		t.Fatalf("verdicts: %d on the page, %d in verdicts.json", len(vs), len(file))
	}
	for i, v := range vs {
		f := file[i]
		d, _ := strconv.ParseFloat(v.D, 64)
		if v.Claim != f.Claim || v.Verdict != f.Verdict || v.Holm != f.VerdictHolm || v.Seeds != fmt.Sprint(len(f.Seeds)) || d != *f.DeltaMean || !shownEquals(v.DText, *f.DeltaMean, 4) {
			t.Errorf("verdict %d: page %+v, verdicts.json %s %s/%s d=%v seeds %v", i, v, f.Claim, f.Verdict, f.VerdictHolm, *f.DeltaMean, f.Seeds)
		}
	}
	if b := p.text("#verdicts-badge"); !strings.Contains(b, "final") || !strings.Contains(b, "verdicts.json") {
		t.Errorf("finished bench's verdicts badge %q", b)
	}
	var charts struct{ Curves, Bands, PassK int }
	p.eval(`({Curves: document.querySelectorAll("#bench-charts .chart .plot canvas").length,
		Bands: board.charts.filter(c => c.spec.sync === "bench").reduce((n, c) => n + c.main.filter(m => m.band).length, 0),
		PassK: document.querySelectorAll("#bench-passk .chart .plot canvas").length})`, &charts)
	if charts.Curves != 3 || charts.Bands != 9 || charts.PassK != 3 {
		t.Errorf("charts: %+v, want 3 curves with a band per arm and 3 pass@k charts (mean, l1, l2)", charts)
	}
	p.shot("bench-done.png")

	// The bench being trained.
	p.open("#/bench/"+url.PathEscape("0/live"), "bench 0/live ")
	cells = p.grid()
	runMetrics := filepath.Join(running.dir, "metrics.jsonl")
	_, _, step := lastValues(t, runMetrics)
	want := map[string]string{"grpo/1": "done", "grpo_ppl/1": "done", "ppo/1": "done", "grpo/2": "running", "grpo_ppl/2": "failed", "ppo/2": "done",
		"grpo/3": "pending", "grpo_ppl/3": "pending", "ppo/3": "pending"}
	for key, st := range want {
		if cells[key].State != st {
			t.Errorf("live bench, %s: %+v, want %s", key, cells[key], st)
		}
	}
	if c := cells["grpo/2"]; c.Step != fmt.Sprint(step) || c.Shown != "15" {
		t.Errorf("the running arm-seed shows step %q (%q), metrics.jsonl is at %v", c.Shown, c.Step, step)
	}
	if b := p.text("#verdicts-badge"); !strings.Contains(b, "provisional") || !strings.Contains(b, "judged live") {
		t.Errorf("live bench's verdicts badge %q", b)
	}
	if r := p.text("#bench-results"); !strings.Contains(r, "No results.csv yet") {
		t.Errorf("live bench's results: %q", r)
	}
	// Rows arrive: the page follows without reloading.
	running.writeTo(t, 30)
	p.wait("step 30 in the grid", `(document.querySelector('#grid td.cell[data-arm="grpo"][data-seed="2"]') || {dataset: {}}).dataset.step === "30"`)
	if c := p.grid()["grpo/2"]; c.Shown != "30" || c.State != "running" {
		t.Errorf("after rows 16-30: %+v", c)
	}
	p.shot("bench-running.png")
	// The arm-seed finishes: its cell turns done, the verdicts take its seed.
	running.finish(t)
	p.wait("grpo seed 2 done", `(document.querySelector('#grid td.cell[data-arm="grpo"][data-seed="2"]') || {dataset: {}}).dataset.state === "done"`)
	p.wait("the verdicts to take seed 2", `[...document.querySelectorAll("#verdicts tr[data-claim]")].some(tr => tr.dataset.claim.startsWith("PPO beats") && tr.querySelector(".seeds").textContent === "2")`)
	if c := p.grid()["grpo/2"]; c.Shown != fmt.Sprint(testSteps) {
		t.Errorf("finished arm-seed: %+v", c)
	}
	p.checkFailures(spec, running)
	var marker int
	p.eval(`window.boardTestMarker || 0`, &marker)
	if marker != 42 {
		t.Errorf("the page was reloaded")
	}

	// Two runs overlaid: the last values shown are metrics.jsonl's.
	ids := []string{"0/live/runs/grpo/seed-2", "0/live/runs/grpo/seed-1"}
	p.open("#/runs/"+url.PathEscape(ids[0])+","+url.PathEscape(ids[1])+"?m=reward/acc,val/mean/avg@4,rollout/entropy", "runs "+strings.Join(ids, ",")+" ")
	type lastRow struct{ Run, Metric, Step, StepText, Value, ValueText string }
	var last []lastRow
	p.eval(`[...document.querySelectorAll("table.last tr[data-run]")].map(tr => ({Run: tr.dataset.run, Metric: tr.dataset.metric,
		Step: tr.querySelector(".last-step").dataset.value, StepText: tr.querySelector(".last-step").textContent,
		Value: tr.querySelector(".last-value").dataset.value, ValueText: tr.querySelector(".last-value").textContent}))`, &last)
	if len(last) != 6 {
		t.Fatalf("last values: %d rows, want 6: %+v", len(last), last)
	}
	for _, r := range last {
		vals, at, _ := lastValues(t, filepath.Join("benches", strings.TrimPrefix(r.Run, "0/"), "metrics.jsonl"))
		v, _ := strconv.ParseFloat(r.Value, 64)
		st, _ := strconv.ParseFloat(r.Step, 64)
		if v != vals[r.Metric] || st != at[r.Metric] || !shownEquals(r.ValueText, vals[r.Metric], 6) || r.StepText != fmt.Sprint(at[r.Metric]) {
			t.Errorf("%s %s: page %+v, metrics.jsonl %v at step %v", r.Run, r.Metric, r, vals[r.Metric], at[r.Metric])
		}
	}
	var lines int
	p.eval(`board.charts.filter(c => c.spec.sync === "runs").reduce((n, c) => n + c.main.length, 0)`, &lines)
	if lines != 6 {
		t.Errorf("%d lines in the run charts, want 2 runs x 3 metrics", lines)
	}
	p.checkControls(ids)

	// The committed paper-countdown bench: its results.csv as shown.
	p.open("#/bench/"+url.PathEscape("1/."), "bench 1/. ")
	p.checkResults(filepath.Join("paper-countdown", "results.csv"))
	p.shot("paper-countdown.png")
	t.Logf("browser test took %s; screenshots in %s", time.Since(began).Round(time.Millisecond), out)
}

// checkControls drives the chart controls on the runs overlaid (ids, both
// finished, metrics reward/acc, val/mean/avg@4, rollout/entropy): the
// cursor synced across the charts by step with each run's value there,
// zoom by dragging (every chart follows) and its reset, log y, smoothing,
// and the CSV and PNG exports.
func (p *page) checkControls(ids []string) {
	t := p.t
	t.Helper()
	path := func(id string) string { return filepath.Join("benches", strings.TrimPrefix(id, "0/"), "metrics.jsonl") }
	acc := []map[float64]float64{column(t, path(ids[0]), "reward/acc"), column(t, path(ids[1]), "reward/acc")}
	ent := []map[float64]float64{column(t, path(ids[0]), "rollout/entropy"), column(t, path(ids[1]), "rollout/entropy")}
	// The cursor: over the first chart, every chart reads out at its step.
	r := p.plotRect("runs", 0)
	p.mouse(input.DispatchMouseEventTypeMouseMoved, r.Left+r.Width*0.6, r.Top+r.Height/2)
	ro := p.readouts("runs")
	if len(ro) != 3 || ro[0].Step == "" {
		t.Fatalf("read-outs after hovering: %+v", ro)
	}
	p.shot("runs.png") // the cursor at that step on every chart
	step, _ := strconv.ParseFloat(ro[0].Step, 64)
	if step < 15 || step > 30 {
		t.Errorf("hovered at 60%% of steps 0-39, read-out at step %v", step)
	}
	for _, o := range ro {
		if o.Metric == "val/mean/avg@4" {
			if o.Step != "20" {
				t.Errorf("val/mean/avg@4 (steps 0, 20, 40) reads out at %q, want 20", o.Step)
			}
			continue
		}
		if o.Step != ro[0].Step || len(o.Values) != 2 {
			t.Errorf("%s reads out %+v, the hovered chart at step %s", o.Metric, o, ro[0].Step)
			continue
		}
		want := acc
		if o.Metric == "rollout/entropy" {
			want = ent
		}
		for i, v := range o.Values {
			got, _ := strconv.ParseFloat(v.Value, 64)
			if got != want[i][step] || v.Step != ro[0].Step {
				t.Errorf("%s %s at step %v: %q, metrics.jsonl %v", o.Metric, v.Label, step, v.Value, want[i][step])
			}
		}
	}
	// Zoom: drag across the first chart; the others take its range.
	p.mouse(input.DispatchMouseEventTypeMousePressed, r.Left+r.Width*0.25, r.Top+r.Height/2, chromedp.ButtonLeft, chromedp.ClickCount(1))
	p.mouse(input.DispatchMouseEventTypeMouseMoved, r.Left+r.Width*0.45, r.Top+r.Height/2, chromedp.ButtonLeft)
	p.mouse(input.DispatchMouseEventTypeMouseMoved, r.Left+r.Width*0.65, r.Top+r.Height/2, chromedp.ButtonLeft)
	p.mouse(input.DispatchMouseEventTypeMouseReleased, r.Left+r.Width*0.65, r.Top+r.Height/2, chromedp.ButtonLeft, chromedp.ClickCount(1))
	type scale struct{ Min, Max float64 }
	var scales []scale
	p.eval(`board.charts.filter(c => c.spec.sync === "runs").map(c => ({Min: c.u.scales.x.min, Max: c.u.scales.x.max}))`, &scales)
	if len(scales) != 3 || scales[0].Min < 5 || scales[0].Max > 35 || scales[0].Max-scales[0].Min < 3 {
		t.Errorf("zoomed to 25-65%% of the first chart: %+v", scales)
	}
	for _, sc := range scales[1:] {
		if sc != scales[0] {
			t.Errorf("the charts' zoom differs: %+v", scales)
		}
	}
	var resetOn bool
	p.eval(`!document.querySelector("#runs-tools .reset-zoom").disabled`, &resetOn)
	if !resetOn {
		t.Errorf("reset zoom is disabled while zoomed")
	}
	if err := chromedp.Do(p.ctx, chromedp.DoubleClick(chromedp.CSS(`#runs-charts .chart:nth-child(2) .u-over`))); err != nil {
		t.Fatal(err)
	}
	p.eval(`board.charts.filter(c => c.spec.sync === "runs").map(c => ({Min: c.u.scales.x.min, Max: c.u.scales.x.max}))`, &scales)
	if scales[0].Min != 0 || scales[0].Max != 39 || scales[1].Max != 40 {
		t.Errorf("after a double-click, the whole steps: %+v", scales)
	}
	// Log y.
	p.click(`#runs-tools .opt-log`)
	var logs []int
	p.eval(`board.charts.filter(c => c.spec.sync === "runs").map(c => c.u.scales.y.distr)`, &logs)
	if !slices.Equal(logs, []int{3, 3, 3}) || !strings.Contains(p.hash(), "log=1") {
		t.Errorf("log y: scales %v, address %s", logs, p.hash())
	}
	p.click(`#runs-tools .opt-log`)
	// Smoothing 0.6: the lines drawn are the EMA of the values logged.
	p.eval(`(() => { const r = document.querySelector("#runs-tools .opt-smooth"); r.value = "0.6"; r.dispatchEvent(new Event("change")); return true; })()`, new(bool))
	var drawn []float64
	p.eval(`board.charts.find(c => c.spec.title === "reward/acc").main[0].drawn.y`, &drawn)
	var raw []float64
	for s := range 40 {
		raw = append(raw, acc[0][float64(s)])
	}
	want := ema(raw, 0.6)
	if len(drawn) != len(want) || !strings.Contains(p.hash(), "smooth=0.6") {
		t.Fatalf("smoothed: %d values, address %s", len(drawn), p.hash())
	}
	for i := range want {
		if math.Abs(drawn[i]-want[i]) > 1e-12 {
			t.Errorf("smoothed reward/acc at step %d: %v, want %v", i, drawn[i], want[i])
			break
		}
	}
	if drawn[5] == raw[5] && drawn[6] == raw[6] {
		t.Errorf("smoothing changed nothing")
	}
	// CSV: the points as logged, and the smoothed ones.
	var text string
	p.eval(`board.charts.find(c => c.spec.title === "reward/acc").csv()`, &text)
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) != 41 || len(recs[0]) != 5 || recs[0][0] != "step" {
		t.Fatalf("CSV: %v, %q", err, text[:min(len(text), 300)])
	}
	for _, rec := range recs[1:] {
		st, _ := strconv.ParseFloat(rec[0], 64)
		for i := range 2 {
			v, err := strconv.ParseFloat(rec[1+2*i], 64)
			if err != nil || v != acc[i][st] {
				t.Errorf("CSV step %v %s: %q, metrics.jsonl %v", st, recs[0][1+2*i], rec[1+2*i], acc[i][st])
			}
		}
		if sm, _ := strconv.ParseFloat(rec[2], 64); math.Abs(sm-want[int(st)]) > 1e-12 {
			t.Errorf("CSV step %v smoothed: %v, want %v", st, sm, want[int(st)])
		}
	}
	p.click(`#runs-charts .chart[data-metric="reward/acc"] button[data-export=csv]`)
	var last string
	p.eval(`document.body.dataset.lastExport || ""`, &last)
	if last != "reward_acc.csv" {
		t.Errorf("CSV export named %q", last)
	}
	// PNG: the chart with its title and legend.
	var dataURL string
	var cw, ch int
	p.eval(`board.charts.find(c => c.spec.title === "reward/acc").png()`, &dataURL)
	p.eval(`board.charts.find(c => c.spec.title === "reward/acc").u.ctx.canvas.width`, &cw)
	p.eval(`board.charts.find(c => c.spec.title === "reward/acc").u.ctx.canvas.height`, &ch)
	b64, ok := strings.CutPrefix(dataURL, "data:image/png;base64,")
	img, err := png.Decode(base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64)))
	if !ok || err != nil || img.Bounds().Dx() != cw || img.Bounds().Dy() <= ch {
		t.Errorf("PNG export: %v, %v; the canvas is %dx%d", err, img, cw, ch)
	}
	p.click(`#runs-charts .chart[data-metric="reward/acc"] button[data-export=png]`)
	p.eval(`document.body.dataset.lastExport || ""`, &last)
	if last != "reward_acc.png" {
		t.Errorf("PNG export named %q", last)
	}
	p.eval(`(() => { const r = document.querySelector("#runs-tools .opt-smooth"); r.value = "0"; r.dispatchEvent(new Event("change")); return true; })()`, new(bool))
}

// checkFailures, on the live bench: the failed arm-seed's reason and
// resume command; per seed, its line stops at its last step (no value
// read out beyond it) while the mean leaves it out; and an arm-seed whose
// trainer is killed turns failed as soon as its lock is released.
func (p *page) checkFailures(spec *bench.Spec, running *armSeed) {
	t := p.t
	t.Helper()
	f := p.text(`#failures .failure[data-arm="grpo_ppl"][data-seed="2"]`)
	if !strings.Contains(f, "non-finite loss") || !strings.Contains(f, "resume: cde-run bench -c live.yaml --out live --jobs 2") {
		t.Errorf("the failed arm-seed's note: %q", f)
	}
	// Per seed.
	p.click(`#bench-tools .opt-seeds`)
	p.wait("one line per arm-seed", `board.charts.some(c => c.spec.sync === "bench" && c.main.some(m => m.s.label === "grpo_ppl seed 2 (failed)"))`)
	var labels []string
	p.eval(`board.charts.find(c => c.spec.title === "reward/acc").main.map(m => m.s.label)`, &labels)
	if len(labels) != 6 || !strings.Contains(p.hash(), "seeds=1") {
		t.Errorf("per seed: %v (address %s)", labels, p.hash())
	}
	var rect struct{ Left, Top, Width, Height float64 }
	p.eval(`(() => { const c = board.charts.find(c => c.spec.title === "reward/acc"); c.box.scrollIntoView({block: "center"});
		const b = c.u.over.getBoundingClientRect(); return {Left: b.left, Top: b.top, Width: b.width, Height: b.height}; })()`, &rect)
	p.mouse(input.DispatchMouseEventTypeMouseMoved, rect.Left+rect.Width*0.8, rect.Top+rect.Height/2)
	var ro readoutOut
	p.eval(`(() => { const c = board.charts.find(c => c.spec.title === "reward/acc"); return {Metric: c.spec.title, Step: c.box.querySelector(".readout").dataset.step,
		Values: [...c.box.querySelectorAll(".readout .rv")].map(r => ({Label: r.dataset.label, Value: r.dataset.value, Step: r.dataset.step}))}; })()`, &ro)
	step, _ := strconv.ParseFloat(ro.Step, 64)
	seen := 0
	for _, v := range ro.Values {
		switch v.Label {
		case "grpo_ppl seed 2 (failed)":
			seen++
			if v.Value != "" {
				t.Errorf("the failed seed (last step 7) reads out %q at step %v", v.Value, step)
			}
		case "grpo seed 1":
			seen++
			want := column(t, filepath.Join("benches", "live", "runs", "grpo", "seed-1", "metrics.jsonl"), "reward/acc")[step]
			if got, _ := strconv.ParseFloat(v.Value, 64); got != want || v.Step != ro.Step {
				t.Errorf("grpo seed 1 at step %v: %+v, metrics.jsonl %v", step, v, want)
			}
		}
	}
	if step < 25 || seen != 2 {
		t.Errorf("per-seed read-out at step %v: %+v", step, ro.Values)
	}
	p.click(`#bench-tools .opt-seeds`)
	p.wait("the mean again", `board.charts.some(c => c.spec.title === "reward/acc" && c.main.length === 3 && c.main.every(m => m.band))`)
	// A trainer killed: failed as soon as its lock goes, not 2 minutes later.
	killed := newArmSeed(t, filepath.Join("benches", "live"), "ppo", 3)
	killed.hold(t)
	killed.writeTo(t, 5)
	cell := `(document.querySelector('#grid td.cell[data-arm="ppo"][data-seed="3"]') || {dataset: {}}).dataset.state`
	p.wait("ppo seed 3 running", cell+` === "running"`)
	began := time.Now()
	killed.unlock()
	p.wait("ppo seed 3 failed", cell+` === "failed"`)
	t.Logf("a killed arm-seed showed failed %s after its lock was released", time.Since(began).Round(time.Millisecond))
	f = p.text(`#failures .failure[data-arm="ppo"][data-seed="3"]`)
	if !strings.Contains(f, "no exit reason recorded") || !strings.Contains(f, "lock was released") || !strings.Contains(f, "resume: cde-run bench -c live.yaml --out live --jobs 2") {
		t.Errorf("the killed arm-seed's note: %q", f)
	}
	if err := os.RemoveAll(killed.dir); err != nil {
		t.Fatal(err)
	}
	p.wait("ppo seed 3 pending again", cell+` === "pending"`)
}

func (p *page) click(sel string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		p.t.Fatalf("click %s: %v", sel, err)
	}
}

func (p *page) hash() string {
	var h string
	p.eval(`location.hash`, &h)
	return h
}
