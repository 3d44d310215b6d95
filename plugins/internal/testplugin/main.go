// Command testplugin is the plugin binary of the plugins tests: it serves
// an in-tree strategy, or misbehaves on purpose.
//
// params: {strategy: ppl|entropy|simhash|multihead, params: {...}} serves
// that in-tree strategy. params: {mode: M, at_step: S} serves a reward-bonus
// strategy "testplugin" (its needs: log-probs, and correct, min_group and
// min_group_key as its params of those names say) whose reward bonus is B and advantage bonus B/2
// on every token (params bonus: B, default 0) and that, from step S on
// (default 0), does M in RewardBonus: crash (os.Exit(3)), hang (sleeps an hour), short (one bonus
// too few), nan, inf, advlen (an AdvantageBonus row one token short),
// panic, error, fault (writes into read-only memory after 20 lines on
// stderr, with 30 goroutines waiting: the Go runtime's fatal fault and a
// long goroutine dump), or nothing ("ok": a zero bonus). Environment:
// CDE_TESTPLUGIN_VERSION offers another protocol version;
// CDE_TESTPLUGIN_START_DELAY sleeps (a Go duration) before serving;
// CDE_TESTPLUGIN_PRINT prints its value on stdout before serving (the
// mistake the host must name clearly).
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins/internal/wire"
	"github.com/cde-rl/cde/plugins/sdk"
	_ "github.com/cde-rl/cde/strategies/all"
)

type bad struct {
	mode  string
	at    int
	bonus float64
	needs core.Needs
}

func (b *bad) Name() string      { return "testplugin" }
func (b *bad) Needs() core.Needs { return b.needs }

func (b *bad) RewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	out := make([]float64, len(r.Seqs))
	for i := range out {
		out[i] = b.bonus
	}
	if info.Step < b.at {
		return out, nil
	}
	switch b.mode {
	case "crash":
		sdk.Logger().Error("testplugin: crashing on purpose")
		os.Exit(3)
	case "hang":
		time.Sleep(time.Hour)
	case "short":
		return out[:len(out)-1], nil
	case "nan":
		out[0] = math.NaN()
	case "inf":
		out[len(out)-1] = math.Inf(1)
	case "panic":
		panic("testplugin: panicking on purpose")
	case "fault":
		for i := range 20 {
			fmt.Fprintf(os.Stderr, "testplugin: working, line %d\n", i+1)
		}
		for range 30 {
			go func() { select {} }()
		}
		ro := "read-only string data"
		b := unsafe.Slice(unsafe.StringData(ro), len(ro))
		b[0] = 'R' // the string's bytes are in read-only memory: SIGSEGV

	case "error":
		return nil, errors.New("testplugin: failing on purpose")
	}
	return out, nil
}

func (b *bad) AdvantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	_, out := r.TokenRows(1) // one column: in the answer region over shared memory
	for i := range out {
		for t := range out[i] {
			out[i][t] = b.bonus / 2
		}
	}
	if b.mode == "advlen" && info.Step >= b.at {
		out[0] = out[0][:len(out[0])-1]
	}
	return out, nil
}

func factory(p *core.Params, algo core.Algorithm) (core.Strategy, error) {
	if name := p.String("strategy", ""); name != "" {
		return core.NewStrategy(name, core.NewParams(p.Path+".params", p.Map("params")), algo)
	}
	b := &bad{mode: p.OneOf("mode", "ok", "ok", "crash", "hang", "short", "nan", "inf", "advlen", "panic", "error", "fault"),
		at: p.Int("at_step", 0), bonus: p.Float("bonus", 0),
		needs: core.Needs{LogProbs: true, Correct: p.Bool("correct", false), MinGroup: p.Int("min_group", 0), MinGroupKey: p.String("min_group_key", "")}}
	sdk.Logger().Info("testplugin configured", "mode", b.mode, "at_step", b.at)
	return b, p.Err()
}

func main() {
	if d, err := time.ParseDuration(os.Getenv("CDE_TESTPLUGIN_START_DELAY")); err == nil {
		time.Sleep(d)
	}
	if s := os.Getenv("CDE_TESTPLUGIN_PRINT"); s != "" {
		fmt.Println(s)
	}
	v, _ := strconv.Atoi(os.Getenv("CDE_TESTPLUGIN_VERSION"))
	wire.Serve(factory, wire.ServeOptions{ProtocolVersion: v, Logger: sdk.Logger()})
}
