package cpu

import (
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/gomlx/compute/dtypes"
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

// Memory tracing, for finding what sets an executable's peak. Off unless
// the environment variable CDE_CPU_MEMSTATS is set when the package loads;
// each execution then prints to stderr the peak of the bytes its
// intermediate buffers held at once (inputs held by the caller excluded),
// the node running at the peak, and the largest values alive then.
var memStatsOn = os.Getenv("CDE_CPU_MEMSTATS") != ""

// memStatsOut receives the reports (nil: stderr).
var memStatsOut io.Writer

type memTrace struct {
	st         *execState
	live, peak int
	fresh      int // bytes not served from the pool
	peakPos    int
	peakTop    []string
}

func (m *memTrace) start(st *execState) { *m = memTrace{st: st} }

func (m *memTrace) got(p *pool, dt dtypes.DType, n int) {
	b := n * dt.Size()
	if dt != dtypes.Float32 || len(p.f32[n]) == 0 {
		m.fresh += b
	}
	m.live += b
	if m.live > m.peak && m.st != nil {
		if m.live > m.peak+m.peak/100 || m.peakTop == nil { // list the values only when the peak moves by 1%
			m.peakTop = m.top(8)
		}
		m.peak, m.peakPos = m.live, m.st.pos
	}
}

func (m *memTrace) put(flat any) {
	dt, n, err := flatInfo(flat)
	if err == nil {
		m.live -= n * dt.Size()
	}
}

// top lists the largest values alive (pooled, owned by the execution).
func (m *memTrace) top(k int) []string {
	type v struct {
		b int
		s string
	}
	var vs []v
	seen := map[*store]bool{}
	if cur := m.st.e.order[m.st.pos]; m.st.values[cur.idx] == nil { // being made
		vs = append(vs, v{int(cur.shape.Memory()), fmt.Sprintf("%s %s (being made)", cur.op, cur.shape)})
	}
	for _, n := range m.st.e.order {
		s := m.st.values[n.idx]
		if s == nil || !s.pooled || seen[s] {
			continue
		}
		seen[s] = true
		vs = append(vs, v{int(n.shape.Memory()), fmt.Sprintf("%s %s", n.op, n.shape)})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].b > vs[j].b })
	var out []string
	for i := 0; i < len(vs) && i < k; i++ {
		out = append(out, fmt.Sprintf("%.1f MB %s", float64(vs[i].b)/1e6, vs[i].s))
	}
	return out
}

func (m *memTrace) report(e *Executable) {
	w := memStatsOut
	if w == nil {
		w = os.Stderr
	}
	at := e.order[min(m.peakPos, len(e.order)-1)]
	fmt.Fprintf(w, "memstats %q: %d nodes, peak %.1f MB at node %d/%d (%s %s), %.1f MB allocated fresh\n",
		e.name, len(e.order), float64(m.peak)/1e6, m.peakPos, len(e.order), at.op, at.shape, float64(m.fresh)/1e6)
	for _, t := range m.peakTop {
		fmt.Fprintf(w, "  %s\n", t)
	}
}
