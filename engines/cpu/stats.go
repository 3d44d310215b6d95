package cpu

import (
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Per-op timing, for finding where an engine's time goes. Off unless the
// environment variable CDE_CPU_OPSTATS is set when the package loads;
// WriteOpStats prints the table.
var (
	opStatsOn = os.Getenv("CDE_CPU_OPSTATS") != ""
	opStatsMu sync.Mutex
	opStats   = map[string]*opStat{}
)

type opStat struct {
	n   int
	dur time.Duration
}

func recordOp(n *node, d time.Duration) {
	key := fmt.Sprintf("%-16s %s", n.op, n.shape)
	if len(n.inputs) > 0 && n.inputs[0].shape.Size() != n.shape.Size() {
		key += fmt.Sprintf(" <- %s", n.inputs[0].shape)
	}
	opStatsMu.Lock()
	s := opStats[key]
	if s == nil {
		s = &opStat{}
		opStats[key] = s
	}
	s.n++
	s.dur += d
	opStatsMu.Unlock()
}

// WriteOpStats writes the top ops by total time (CDE_CPU_OPSTATS must be
// set) and resets the counters.
func WriteOpStats(w io.Writer, top int) {
	opStatsMu.Lock()
	defer opStatsMu.Unlock()
	type row struct {
		k string
		s *opStat
	}
	var rows []row
	var total time.Duration
	byOp := map[string]time.Duration{}
	for k, s := range opStats {
		rows = append(rows, row{k, s})
		total += s.dur
		byOp[k[:16]] += s.dur
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].s.dur > rows[j].s.dur })
	fmt.Fprintf(w, "total %v\n", total)
	type kv struct {
		k string
		d time.Duration
	}
	var ops []kv
	for k, d := range byOp {
		ops = append(ops, kv{k, d})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].d > ops[j].d })
	for _, o := range ops {
		fmt.Fprintf(w, "  %s %5.1f%%\n", o.k, 100*float64(o.d)/float64(total))
	}
	for i, r := range rows {
		if i >= top {
			break
		}
		fmt.Fprintf(w, "%5.1f%% %8v x%-5d %s\n", 100*float64(r.s.dur)/float64(total), r.s.dur/time.Duration(r.s.n), r.s.n, r.k)
	}
	opStats = map[string]*opStat{}
}
