package xla

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

// genCheckEvery is how many tokens the device loop decodes between two
// reads of its all-done flag: the only values that cross to the host
// while it runs. At most genCheckEvery-1 steps run after the last row has
// stopped (each a no-op for the results).
const genCheckEvery = 8

// genState is the decode state the device loop keeps on the device, in
// the order the graphs take and return it:
//
//	token int32 [B]      the last token sampled (the next step's input)
//	pos   int32 [B]      its position
//	step  int32 []       the index of the next response token
//	done  bool [B]       rows that stopped
//	count int32 [B]      tokens recorded per row
//	toks  int32 [B,T]    the responses (T = max tokens)
//	lps   float32 [B,T]  their log-probs
//	ents  float32 [B,T]  the entropies of the distributions they came from
//	all   bool []        every row is done
//
// then, with pooling, the hidden states that chose the last token, the one
// before it, and their running sum, each float32 [B,d]; then the caches.
const (
	gsToken = iota
	gsPos
	gsStep
	gsDone
	gsCount
	gsToks
	gsLPs
	gsEnts
	gsAll
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

// record writes one sampled token per row into the state: rows not done
// get tok, lp, ent at column step (and h into the pooled states), then
// stop at a stop token or at maxTokens. It returns the state's recorded
// part in genState order from done on (done, count, toks, lps, ents, all,
// pooled states).
func (s genSpec) record(step, tok, lp, ent, h, done, count, toks, lps, ents *graph.Node, pool []*graph.Node) []*graph.Node {
	g := tok.Graph()
	b := tok.Shape().Dimensions[0]
	T := s.maxTokens
	active := graph.LogicalNot(done)
	col := graph.LogicalAnd(
		graph.Equal(graph.Iota(g, shapesOf(dtypes.Int32, b, T), 1), graph.BroadcastToDims(step, b, T)),
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
	done = graph.LogicalOr(done, graph.LogicalOr(hit, full))
	out := []*graph.Node{done, count, toks, lps, ents, graph.ReduceLogicalAnd(done)}
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

// buildDevicePrefill: inputs tokens int32 [B,P], last int32 [B], pos int32
// [B] (each prompt's length), keys uint32 [B,2], invTemp; samples token 0
// and returns the whole genState.
func (n *net) buildDevicePrefill(tmax int, s genSpec) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	inner := n.buildPrefill(tmax)
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		tokens, last, pos, keys, invTemp := in[0], in[1], in[2], in[3], in[4]
		g := tokens.Graph()
		b := tokens.Shape().Dimensions[0]
		step := graph.Const(g, int32(0))
		out := inner(ctx, []*graph.Node{tokens, last, gumbelGraph(keys, step, n.cfg.Vocab), invTemp})
		tok, lp, ent, h, caches := out[0], out[1], out[2], out[3], out[4:]
		T, d := s.maxTokens, n.cfg.DModel
		zf := graph.Zeros(g, shapesOf(dtypes.Float32, b, T))
		var pool []*graph.Node
		if s.pooling {
			z := graph.Zeros(g, shapesOf(dtypes.Float32, b, d))
			pool = []*graph.Node{z, z, z}
		}
		rec := s.record(step, tok, lp, ent, h, graph.Zeros(g, shapesOf(dtypes.Bool, b)), graph.Zeros(g, shapesOf(dtypes.Int32, b)),
			graph.Zeros(g, shapesOf(dtypes.Int32, b, T)), zf, zf, pool)
		state := []*graph.Node{tok, pos, graph.OnePlus(step)}
		state = append(state, rec...)
		return append(state, caches...)
	}
}

// buildDeviceDecode: inputs keys uint32 [B,2], invTemp, then the genState
// (the caches last); samples the token at step and returns the new state.
func (n *net) buildDeviceDecode(s genSpec) func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
	inner := n.buildDecode()
	return func(ctx *model.Scope, in []*graph.Node) []*graph.Node {
		keys, invTemp, st := in[0], in[1], in[2:]
		step := st[gsStep]
		npool := 0
		if s.pooling {
			npool = 3
		}
		caches := st[gsFixed+npool:]
		args := append([]*graph.Node{st[gsToken], st[gsPos], gumbelGraph(keys, step, n.cfg.Vocab), invTemp}, caches...)
		out := inner(ctx, args)
		tok, lp, ent, h := out[0], out[1], out[2], out[3]
		rec := s.record(step, tok, lp, ent, h, st[gsDone], st[gsCount], st[gsToks], st[gsLPs], st[gsEnts], st[gsFixed:gsFixed+npool])
		state := []*graph.Node{tok, graph.OnePlus(st[gsPos]), graph.OnePlus(step)}
		state = append(state, rec...)
		return append(state, out[4:]...)
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

// generateOnDevice is Generate with its loop on the device (see Generate).
func (b *Backend) generateOnDevice(req core.GenerateRequest) ([]core.Generation, error) {
	c := b.policy.cfg
	nb := len(req.Prompts)
	if nb == 0 {
		return nil, nil
	}
	P, err := b.checkGenerate(req)
	if err != nil {
		return nil, err
	}
	tmax := P + req.MaxTokens
	spec := genSpec{maxTokens: req.MaxTokens, stops: []int32{b.opts.EOS}, pooling: req.Pooling != ""}
	for _, t := range req.StopTokens {
		if !slices.Contains(spec.stops, t) {
			spec.stops = append(spec.stops, t)
		}
	}
	tokens, last, pos := b.promptBatch(req, P)
	flatKeys := make([]uint32, 0, 2*nb)
	for _, k := range rowKeys(req.Seed, nb) {
		flatKeys = append(flatKeys, k[0], k[1])
	}
	keys := tensors.FromFlatDataAndDimensions(flatKeys, nb, 2)
	defer keys.FinalizeAll()
	invTemp := float32(1 / req.Temperature)
	pre, err := b.policy.deviceExec(spec.key("prefill", tmax), b.policy.buildDevicePrefill(tmax, spec))
	if err != nil {
		return nil, err
	}
	dec, err := b.policy.deviceExec(spec.key("decode", 0), b.policy.buildDeviceDecode(spec))
	if err != nil {
		return nil, err
	}
	state, err := run(pre, tensors.FromFlatDataAndDimensions(tokens, nb, P), tensors.FromFlatDataAndDimensions(last, nb),
		tensors.FromFlatDataAndDimensions(pos, nb), keys, invTemp)
	if err != nil {
		return nil, fmt.Errorf("generate: prefill: %w", err)
	}
	free := func() {
		for _, t := range state {
			t.FinalizeAll()
		}
	}
	for step := 1; step < req.MaxTokens; step++ {
		if step%genCheckEvery == 0 && tensors.MustCopyFlatData[bool](state[gsAll])[0] {
			break
		}
		if stopped(req.Done) {
			free()
			return nil, core.ErrGenerateStopped
		}
		args := []any{keys, invTemp}
		for _, t := range state {
			// Every state tensor is donated: the engine may update the
			// caches and buffers in place.
			d, err := graph.DonateTensorBuffer(t, b.engine, 0)
			if err != nil {
				free()
				return nil, fmt.Errorf("generate: decode step %d: donating state: %w", step, err)
			}
			args = append(args, d)
		}
		next, err := run(dec, args...)
		if err != nil {
			return nil, fmt.Errorf("generate: decode step %d: %w", step, err)
		}
		state = next
	}
	defer free()
	count := tensors.MustCopyFlatData[int32](state[gsCount])
	toks := tensors.MustCopyFlatData[int32](state[gsToks])
	lps := tensors.MustCopyFlatData[float32](state[gsLPs])
	ents := tensors.MustCopyFlatData[float32](state[gsEnts])
	T := req.MaxTokens
	gens := make([]core.Generation, nb)
	for i := range gens {
		n := int(count[i])
		g := &gens[i]
		g.Tokens = slices.Clone(toks[i*T : i*T+n])
		g.LogProbs = make([]float64, n)
		g.Entropies = make([]float64, n)
		for j := range n {
			g.LogProbs[j] = float64(lps[i*T+j])
			g.Entropies[j] = float64(ents[i*T+j])
		}
		g.Truncated = n == T && !slices.Contains(spec.stops, g.Tokens[n-1])
	}
	if spec.pooling {
		d := c.DModel
		lastH := tensors.MustCopyFlatData[float32](state[gsFixed])
		prevH := tensors.MustCopyFlatData[float32](state[gsFixed+1])
		sumH := tensors.MustCopyFlatData[float32](state[gsFixed+2])
		for i := range gens {
			n := len(gens[i].Tokens)
			e := make([]float64, d)
			switch strings.ToLower(req.Pooling) {
			case "mean":
				for j := range e {
					e[j] = float64(sumH[i*d+j]) / float64(n)
				}
			case "second_last":
				src := lastH
				if n >= 2 {
					src = prevH
				}
				for j := range e {
					e[j] = float64(src[i*d+j])
				}
			default:
				for j := range e {
					e[j] = float64(lastH[i*d+j])
				}
			}
			gens[i].Embedding = e
		}
	}
	return gens, nil
}
