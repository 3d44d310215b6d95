package xla

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

// genCheckEvery is how many tokens the device loop decodes between two
// reads of its done flags: the only values that cross to the host while it
// runs, besides the rows of the responses that finished. A row that stops
// waits at most genCheckEvery-1 steps for the next prompt (each a no-op for
// the results).
const genCheckEvery = 8

// genState is the decode state the device loop keeps on the device, one
// row per slot, in the order the graphs take and return it:
//
//	token int32 [S]      the last token sampled (the next step's input)
//	pos   int32 [S]      its position
//	keys  uint32 [S,2]   the noise key of the slot's response
//	done  bool [S]       the slot's response stopped
//	count int32 [S]      tokens recorded, the index of the next one
//	toks  int32 [S,T]    the responses (T = max tokens)
//	lps   float32 [S,T]  their log-probs
//	ents  float32 [S,T]  the entropies of the distributions they came from
//
// then, with pooling, the hidden states that chose the last token, the one
// before it, and their running sum, each float32 [S,d]; then the caches.
const (
	gsToken = iota
	gsPos
	gsKeys
	gsDone
	gsCount
	gsToks
	gsLPs
	gsEnts
	gsFixed // the pooling states (if any) and caches start here
)

// genSpec is what the device graphs bake in: the response length, the stop
// tokens (EOS first) and whether pooled states are kept.
type genSpec struct {
	maxTokens int
	stops     []int32
	pooling   bool
}

func (s genSpec) key(kind string, tmax int) string {
	return fmt.Sprintf("%s/%d/%d/%v/%v", kind, tmax, s.maxTokens, s.stops, s.pooling)
}

func (s genSpec) npool() int {
	if s.pooling {
		return 3
	}
	return 0
}

// record writes one sampled token per row: rows not done get tok, lp, ent
// at column count (and h into the pooled states), then stop at a stop
// token or at maxTokens. It returns done, count, toks, lps, ents and the
// pooled states.
func (s genSpec) record(tok, lp, ent, h, done, count, toks, lps, ents *graph.Node, pool []*graph.Node) []*graph.Node {
	g := tok.Graph()
	b := tok.Shape().Dimensions[0]
	T := s.maxTokens
	active := graph.LogicalNot(done)
	col := graph.LogicalAnd(
		graph.Equal(graph.Iota(g, shapesOf(dtypes.Int32, b, T), 1), graph.BroadcastToDims(graph.Reshape(count, b, 1), b, T)),
		graph.BroadcastToDims(graph.Reshape(active, b, 1), b, T))
	put := func(buf, v *graph.Node) *graph.Node {
		return graph.Where(col, graph.BroadcastToDims(graph.Reshape(v, b, 1), b, T), buf)
	}
	toks, lps, ents = put(toks, tok), put(lps, lp), put(ents, ent)
	count = graph.Add(count, graph.ConvertDType(active, dtypes.Int32))
	stopsC := graph.Const(g, s.stops)
	hit := graph.ReduceLogicalOr(graph.Equal(
		graph.BroadcastToDims(graph.Reshape(tok, b, 1), b, len(s.stops)),
		graph.BroadcastToDims(graph.Reshape(stopsC, 1, len(s.stops)), b, len(s.stops))), 1)
	full := graph.GreaterOrEqual(count, graph.ConstAs(count, int32(T)))
	done = graph.LogicalOr(done, graph.LogicalAnd(active, graph.LogicalOr(hit, full)))
	out := []*graph.Node{done, count, toks, lps, ents}
	if s.pooling {
		d := h.Shape().Dimensions[1]
		act := graph.BroadcastToDims(graph.Reshape(active, b, 1), b, d)
		last, prev, sum := pool[0], pool[1], pool[2]
		prev = graph.Where(act, last, prev)
		last = graph.Where(act, h, last)
		sum = graph.Add(sum, graph.Where(act, h, graph.ZerosLike(h)))
		out = append(out, last, prev, sum)
	}
	return out
}

// buildDevicePrefill: inputs tokens int32 [k,P], last int32 [k], pos int32
// [k] (each prompt's length), keys uint32 [k,2], invTemp; samples each
// row's token 0 and returns a fresh genState of k rows.
func (n *net) buildDevicePrefill(tmax int, s genSpec) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	inner := n.buildPrefill(tmax)
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		tokens, last, pos, keys, invTemp := in[0], in[1], in[2], in[3], in[4]
		g := tokens.Graph()
		b := tokens.Shape().Dimensions[0]
		zero := graph.Zeros(g, shapesOf(dtypes.Int32, b))
		out := inner(ctx, []*graph.Node{tokens, last, gumbelGraph(keys, zero, n.cfg.Vocab), invTemp})
		tok, lp, ent, h, caches := out[0], out[1], out[2], out[3], out[4:]
		T, d := s.maxTokens, n.cfg.DModel
		zf := graph.Zeros(g, shapesOf(dtypes.Float32, b, T))
		var pool []*graph.Node
		if s.pooling {
			z := graph.Zeros(g, shapesOf(dtypes.Float32, b, d))
			pool = []*graph.Node{z, z, z}
		}
		rec := s.record(tok, lp, ent, h, graph.Zeros(g, shapesOf(dtypes.Bool, b)), zero,
			graph.Zeros(g, shapesOf(dtypes.Int32, b, T)), zf, zf, pool)
		state := append([]*graph.Node{tok, pos, keys}, rec...)
		return append(state, caches...)
	}
}

// buildDeviceDecode: inputs invTemp, then the genState (the caches last);
// samples each slot's next token and returns the new state.
func (n *net) buildDeviceDecode(s genSpec) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	inner := n.buildDecode()
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		invTemp, st := in[0], in[1:]
		np := s.npool()
		caches := st[gsFixed+np:]
		noise := gumbelGraph(st[gsKeys], st[gsCount], n.cfg.Vocab)
		out := n.decodeWith(ctx, inner, st[gsToken], st[gsPos], noise, invTemp, caches)
		tok, lp, ent, h := out[0], out[1], out[2], out[3]
		rec := s.record(tok, lp, ent, h, st[gsDone], st[gsCount], st[gsToks], st[gsLPs], st[gsEnts], st[gsFixed:gsFixed+np])
		state := append([]*graph.Node{tok, graph.OnePlus(st[gsPos]), st[gsKeys]}, rec...)
		return append(state, out[4:]...)
	}
}

func (n *net) decodeWith(ctx *model.Scope, inner func(*model.Scope, []*graph.Node) []*graph.Node, token, pos, noise, invTemp *graph.Node, caches []*graph.Node) []*graph.Node {
	return inner(ctx, append([]*graph.Node{token, pos, noise, invTemp}, caches...))
}

// buildDeviceInsert: inputs from int32 [S] (for each slot, the row of the
// fresh state that takes it, or -1 to keep the slot), then the fresh state
// (k rows), then the current state (S rows); returns the merged state.
func (n *net) buildDeviceInsert(s genSpec) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		from := in[0]
		m := (len(in) - 1) / 2
		fresh, cur := in[1:1+m], in[1+m:]
		S := from.Shape().Dimensions[0]
		take := graph.GreaterOrEqual(from, graph.ConstAs(from, int32(0)))
		idx := graph.Reshape(graph.Max(from, graph.ConstAs(from, int32(0))), S, 1)
		out := make([]*graph.Node, m)
		for i := range m {
			moved := graph.Gather(fresh[i], idx) // [S, ...] from [k, ...]
			dims := cur[i].Shape().Dimensions
			mask := take
			if len(dims) > 1 {
				shape := append([]int{S}, slices.Repeat([]int{1}, len(dims)-1)...)
				mask = graph.BroadcastToDims(graph.Reshape(take, shape...), dims...)
			}
			out[i] = graph.Where(mask, moved, cur[i])
		}
		return out
	}
}

// deviceExec returns the compiled graph for key, building it with fn once.
func (n *net) deviceExec(key string, fn func(ctx *model.Scope, in []*graph.Node) []*graph.Node) (*model.Exec, error) {
	if e, ok := n.devGen[key]; ok {
		return e, nil
	}
	e, err := model.NewExec(n.backend, n.ctx.Store(), fn)
	if err != nil {
		return nil, err
	}
	e.SetMaxCache(execCacheShapes)
	if n.devGen == nil {
		n.devGen = map[string]*model.Exec{}
	}
	n.devGen[key] = e
	return e, nil
}

// deviceGen is one generateOnDevice call's graphs and inputs.
type deviceGen struct {
	b *Backend
	// n is the net that generates (Backend.genView).
	n       *net
	req     core.GenerateRequest
	spec    genSpec
	P       int
	invTemp float32
	pre     *model.Exec
	dec     *model.Exec
	ins     *model.Exec
}

// prefill runs the prompts of responses rows (at most k of them; the rest
// of the k rows repeat the first, and are never inserted) and returns the
// fresh state of k rows.
func (d *deviceGen) prefill(rows []int, k int) ([]*tensors.Tensor, error) {
	nb := len(rows)
	sub := core.GenerateRequest{Prompts: make([][]int32, k)}
	keys := make([]uint32, 0, 2*k)
	for i := range k {
		r := rows[min(i, nb-1)]
		sub.Prompts[i] = d.req.Prompts[r]
		kk := rowKeys(d.req.Seed, r, 1)[0]
		keys = append(keys, kk[0], kk[1])
	}
	tokens, last, pos := d.b.promptBatch(sub, d.P)
	st, err := run(d.pre, tensors.FromFlatDataAndDimensions(tokens, k, d.P), tensors.FromFlatDataAndDimensions(last, k),
		tensors.FromFlatDataAndDimensions(pos, k), tensors.FromFlatDataAndDimensions(keys, k, 2), d.invTemp)
	if err != nil {
		return nil, fmt.Errorf("generate: prefill: %w", err)
	}
	return st, nil
}

// donated wraps each tensor for donation.
func (d *deviceGen) donated(ts []*tensors.Tensor) ([]any, error) {
	out := make([]any, len(ts))
	for i, t := range ts {
		v, err := graph.DonateTensorBuffer(t, d.b.engine, 0)
		if err != nil {
			return nil, fmt.Errorf("generate: donating state: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

func finalize(ts []*tensors.Tensor) {
	for _, t := range ts {
		t.FinalizeAll()
	}
}

// generateOnDevice is Generate with its loop on the device (see Generate).
// With req.Slots below the number of prompts, that many responses decode
// at once and a response that stops frees its slot for the next prompt.
// P is the padded prompt length (checkGenerate).
func (b *Backend) generateOnDevice(req core.GenerateRequest, P int) ([]core.Generation, error) {
	nb := len(req.Prompts)
	var err error
	S := nb
	if req.Slots > 0 && req.Slots < nb {
		S = req.Slots
	}
	tmax := P + req.MaxTokens
	spec := genSpec{maxTokens: req.MaxTokens, stops: []int32{b.opts.EOS}, pooling: req.Pooling != ""}
	for _, t := range req.StopTokens {
		if !slices.Contains(spec.stops, t) {
			spec.stops = append(spec.stops, t)
		}
	}
	gn, err := b.genView()
	if err != nil {
		return nil, err
	}
	d := &deviceGen{b: b, n: gn, req: req, spec: spec, P: P, invTemp: float32(1 / req.Temperature)}
	if d.pre, err = gn.deviceExec(spec.key("prefill", tmax), gn.buildDevicePrefill(tmax, spec)); err != nil {
		return nil, err
	}
	if d.dec, err = gn.deviceExec(spec.key("decode", 0), gn.buildDeviceDecode(spec)); err != nil {
		return nil, err
	}
	slot := make([]int, S) // the response in each slot, -1 for none
	first := make([]int, S)
	for i := range slot {
		slot[i], first[i] = i, i
	}
	state, err := d.prefill(first, S)
	if err != nil {
		return nil, err
	}
	defer func() { finalize(state) }()
	gens := make([]core.Generation, nb)
	next := S // the next response without a slot
	left := nb
	for step := 1; left > 0; step++ {
		// Every genCheckEvery steps, and at step MaxTokens, when the first
		// responses have all stopped.
		if step%genCheckEvery == 0 || step == req.MaxTokens {
			done := tensors.MustCopyFlatData[bool](state[gsDone])
			var finished []int
			for s, r := range slot {
				if r >= 0 && done[s] {
					finished = append(finished, s)
				}
			}
			if len(finished) > 0 {
				d.harvest(state, slot, finished, gens)
				left -= len(finished)
				if left == 0 {
					break
				}
				if next < nb {
					k := min(len(finished), nb-next)
					if state, err = d.refill(state, slot, finished[:k], next); err != nil {
						return nil, err
					}
					next += k
				}
			}
		}
		if stopped(req.Done) {
			return nil, core.ErrGenerateStopped
		}
		args, err := d.donated(state)
		if err != nil {
			return nil, err
		}
		out, err := run(d.dec, append([]any{d.invTemp}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("generate: decode step %d: %w", step, err)
		}
		state = out
	}
	return gens, nil
}

// harvest copies the finished slots' responses into gens and frees them.
func (d *deviceGen) harvest(state []*tensors.Tensor, slot, finished []int, gens []core.Generation) {
	T := d.spec.maxTokens
	count := tensors.MustCopyFlatData[int32](state[gsCount])
	toks := tensors.MustCopyFlatData[int32](state[gsToks])
	lps := tensors.MustCopyFlatData[float32](state[gsLPs])
	ents := tensors.MustCopyFlatData[float32](state[gsEnts])
	var lastH, prevH, sumH []float32
	if d.spec.pooling {
		lastH = tensors.MustCopyFlatData[float32](state[gsFixed])
		prevH = tensors.MustCopyFlatData[float32](state[gsFixed+1])
		sumH = tensors.MustCopyFlatData[float32](state[gsFixed+2])
	}
	dm := d.n.cfg.DModel
	for _, s := range finished {
		n := int(count[s])
		g := &gens[slot[s]]
		g.Tokens = slices.Clone(toks[s*T : s*T+n])
		g.LogProbs = make([]float64, n)
		g.Entropies = make([]float64, n)
		for j := range n {
			g.LogProbs[j] = float64(lps[s*T+j])
			g.Entropies[j] = float64(ents[s*T+j])
		}
		g.Truncated = n == T && !slices.Contains(d.spec.stops, g.Tokens[n-1])
		if d.spec.pooling {
			e := make([]float64, dm)
			src, scale := lastH, 1.0
			switch strings.ToLower(d.req.Pooling) {
			case "mean":
				src, scale = sumH, 1/float64(n)
			case "second_last":
				if n >= 2 {
					src = prevH
				}
			}
			for j := range e {
				e[j] = float64(src[s*dm+j]) * scale
			}
			g.Embedding = e
		}
		slot[s] = -1
	}
}

// refill prefills responses next, next+1, ... into the slots free (k of
// them) and returns the merged state. The fresh batch is padded to a power
// of two rows, so at most log2(S)+1 prefill shapes are compiled.
func (d *deviceGen) refill(state []*tensors.Tensor, slot, free []int, next int) ([]*tensors.Tensor, error) {
	k := len(free)
	rows := make([]int, k)
	for i := range rows {
		rows[i] = next + i
	}
	kp := 1 << bits.Len(uint(k-1))
	fresh, err := d.prefill(rows, min(kp, len(slot)))
	if err != nil {
		return nil, err
	}
	defer finalize(fresh)
	if d.ins == nil {
		if d.ins, err = d.n.deviceExec(d.spec.key("insert", 0), d.n.buildDeviceInsert(d.spec)); err != nil {
			return nil, err
		}
	}
	from := make([]int32, len(slot))
	for i := range from {
		from[i] = -1
	}
	for i, s := range free {
		from[s] = int32(i)
		slot[s] = rows[i]
	}
	cur, err := d.donated(state)
	if err != nil {
		return nil, err
	}
	args := []any{tensors.FromFlatDataAndDimensions(from, len(slot))}
	for _, t := range fresh {
		args = append(args, t)
	}
	merged, err := run(d.ins, append(args, cur...)...)
	if err != nil {
		return nil, fmt.Errorf("generate: filling freed slots: %w", err)
	}
	return merged, nil
}
