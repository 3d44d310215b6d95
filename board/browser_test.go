package board

import (
	"bytes"
	"context"
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
	"strconv"
	"strings"
	"testing"
	"time"

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

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.DisableGPU,
		chromedp.WindowSize(1360, 900), chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
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
	p.eval(`({Curves: document.querySelectorAll("#bench-charts .chart .plot svg").length, Bands: document.querySelectorAll("#bench-charts path[fill-opacity]").length,
		PassK: document.querySelectorAll("#bench-passk .chart .plot svg").length})`, &charts)
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
	p.eval(`document.querySelectorAll("#runs-charts svg path[stroke-width]").length`, &lines)
	if lines != 6 {
		t.Errorf("%d lines in the run charts, want 2 runs x 3 metrics", lines)
	}
	p.shot("runs.png")

	// The committed paper-countdown bench: its results.csv as shown.
	p.open("#/bench/"+url.PathEscape("1/."), "bench 1/. ")
	p.checkResults(filepath.Join("paper-countdown", "results.csv"))
	p.shot("paper-countdown.png")
	t.Logf("browser test took %s; screenshots in %s", time.Since(began).Round(time.Millisecond), out)
}
