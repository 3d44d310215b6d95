package wire

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/cde-rl/cde/core"
	pb "github.com/cde-rl/cde/plugins/proto"
)

// ProtocolVersion is the version of plugins/proto/cde_strategy.proto this
// build speaks: 2 added the TokenLoss hook, 3 the shared-memory transport
// (shm.go). It is negotiated through
// go-plugin's versioned plugin sets: the host offers every version from
// MinProtocolVersion to ProtocolVersion and go-plugin picks the highest the
// plugin offers too; a plugin offering none of them is refused at start
// with an error naming both sides' versions.
const ProtocolVersion = 3

// MinProtocolVersion is the oldest protocol version the host still serves
// (version 1: every hook but TokenLoss).
const MinProtocolVersion = 1

// HostVersions are the versioned plugin sets the host offers.
func HostVersions() map[int]plugin.PluginSet { return HostVersionsUpTo(ProtocolVersion) }

// HostVersionsUpTo are the plugin sets of a host that speaks versions
// MinProtocolVersion to max (tests stand for an older host with it).
func HostVersionsUpTo(max int) map[int]plugin.PluginSet {
	out := map[int]plugin.PluginSet{}
	for v := MinProtocolVersion; v <= max; v++ {
		out[v] = plugin.PluginSet{PluginName: &GRPCPlugin{}}
	}
	return out
}

// PluginName is the name under which the strategy service is dispensed.
const PluginName = "strategy"

// Handshake is the go-plugin handshake: a plugin binary refuses to run
// unless started by a host that sets the magic cookie (running it by hand
// prints go-plugin's "this binary is a plugin" message).
var Handshake = plugin.HandshakeConfig{
	// ProtocolVersion stays 1 here: the strategy protocol's version is
	// negotiated with VersionedPlugins.
	ProtocolVersion:  1,
	MagicCookieKey:   "CDE_STRATEGY_PLUGIN",
	MagicCookieValue: "c0e5e1a7-rlvr-exploration-strategy",
}

// MaxMessageSize is the gRPC message limit, both directions, host and
// plugin: 1.75 GiB, under protobuf's 2 GiB hard limit.
//
// The paper-scale batch is N = 2,048 responses x T = 3,072 tokens
// (6,291,456 tokens) with K = 16 value heads. The largest request is an
// Observe or AdvantageBonus call carrying every per-token double: log-probs,
// entropies, advantages, advantage bonus and returns (5) plus K = 16 head
// values, 21 x 8 = 168 bytes per token = 1,056,964,608 bytes, plus token ids
// (at most 5 bytes each as varints: 31.5 MB), response texts (about 25 MB)
// and embeddings (N x d x 8 bytes: 67 MB for d = 4,096): about 1.18 GB.
// The largest response, HeadMasks, is T x K doubles per sequence: 805 MB.
// MessageBytes computes the request bound; a test checks it stays under
// this limit.
const MaxMessageSize = 7 << 28

// MessageBytes bounds the size of a Batch message of n sequences of t
// tokens with k value heads, embeddings of dimension d and prompts and
// texts of t characters at most (the worst case above).
func MessageBytes(n, t, k, d int) int64 {
	tokens := int64(n) * int64(t)
	perToken := int64(5+k)*8 + 5 /* response id */ + 4 /* text, UTF-8 */
	perSeq := int64(8*4+64) + int64(t)*5 /* prompt ids */ + int64(d)*8
	return tokens*perToken + int64(n)*perSeq + 1024
}

// FlowWindow is the HTTP/2 flow-control window of plugin connections (host
// and plugin side). gRPC's default (64 KiB, grown by BDP estimation) stalls
// on the large batches of a local plugin; a fixed 256 MiB window lets a
// batch stream at memory speed. It costs nothing until data is in flight.
const FlowWindow = 256 << 20

func CallOptions() []grpc.CallOption {
	return []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)}
}

// GRPCPlugin is the go-plugin glue for the strategy service. On the plugin
// side it serves the strategies Factory builds; on the host side it
// dispenses a pb.StrategyClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Factory builds the served strategy (plugin side only).
	Factory core.StrategyFactory
	// Version is the protocol version the server reports (0: ProtocolVersion).
	Version uint32
	// Logger receives the server's own warnings (nil: none).
	Logger hclog.Logger
}

// GRPCServer registers the strategy service.
func (g *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	v := g.Version
	if v == 0 {
		v = ProtocolVersion
	}
	pb.RegisterStrategyServer(s, &server{factory: g.Factory, version: v, log: g.Logger})
	return nil
}

// GRPCClient returns a pb.StrategyClient on the connection.
func (g *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewStrategyClient(c), nil
}

// Caps is the bit set of optional hooks a plugin declares (the
// Capabilities message).
type Caps uint8

const (
	CapReward Caps = 1 << iota
	CapAdvantage
	CapLoss
	CapHeadMasks
	CapObserve
	CapState
	CapTokenLoss // protocol version 2
)

func CapsFromProto(c *pb.Capabilities) Caps {
	var out Caps
	if c == nil {
		return 0
	}
	for _, x := range []struct {
		on  bool
		bit Caps
	}{{c.RewardBonus, CapReward}, {c.AdvantageBonus, CapAdvantage}, {c.LossTerms, CapLoss},
		{c.HeadMasks, CapHeadMasks}, {c.Observe, CapObserve}, {c.State, CapState}, {c.TokenLoss, CapTokenLoss}} {
		if x.on {
			out |= x.bit
		}
	}
	return out
}

// capsOf lists the hooks in h that protocol version v carries
// (TokenLoss from version 2).
func capsOf(h core.Hooks, v uint32) *pb.Capabilities {
	return &pb.Capabilities{RewardBonus: h.RewardBonus != nil, AdvantageBonus: h.AdvantageBonus != nil,
		LossTerms: h.LossTerms != nil, HeadMasks: h.HeadMasks != nil, Observe: h.Observe != nil,
		State: h.SaveState != nil, TokenLoss: h.TokenLoss != nil && v >= 2}
}

// String lists the hooks, e.g. "reward_bonus,observe".
func (c Caps) String() string {
	names := []string{"reward_bonus", "advantage_bonus", "loss_terms", "head_masks", "observe", "state", "token_loss"}
	s := ""
	for i, n := range names {
		if c&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

func needsToProto(n core.Needs) *pb.Needs {
	return &pb.Needs{Logprobs: n.LogProbs, Entropies: n.Entropies, Pooling: n.Pooling,
		ValueHeads: int32(n.ValueHeads), HeadMasks: n.HeadMasks,
		Correct: n.Correct, MinGroup: int32(min(n.MinGroup, math.MaxInt32)), MinGroupKey: n.MinGroupKey}
}

func NeedsFromProto(n *pb.Needs) core.Needs {
	if n == nil {
		return core.Needs{}
	}
	return core.Needs{LogProbs: n.Logprobs, Entropies: n.Entropies, Pooling: n.Pooling,
		ValueHeads: int(n.ValueHeads), HeadMasks: n.HeadMasks,
		Correct: n.Correct, MinGroup: int(n.MinGroup), MinGroupKey: n.MinGroupKey}
}

func InfoToProto(i core.StepInfo) *pb.StepInfo {
	return &pb.StepInfo{Step: int64(i.Step), TotalSteps: int64(i.TotalSteps), Algorithm: i.Algorithm, Seed: i.Seed,
		MaxResponseTokens: int64(i.MaxResponseTokens)}
}

func infoFromProto(i *pb.StepInfo) core.StepInfo {
	if i == nil {
		return core.StepInfo{}
	}
	return core.StepInfo{Step: int(i.Step), TotalSteps: int(i.TotalSteps), Algorithm: i.Algorithm, Seed: i.Seed,
		MaxResponseTokens: int(i.MaxResponseTokens)}
}

// EncodeBatch packs r for a plugin with the given needs. Optional signals
// the plugin did not declare are not sent (as core/strategytest's
// StripUndeclared); log-probs always are (the trainer always computes
// them); Advantages, AdvantageBonus and Returns are sent when present.
// HeadMask is never sent. A signal present on some sequences but missing or
// of the wrong length on others is an error.
func EncodeBatch(info core.StepInfo, r *core.Rollout, needs core.Needs) (*pb.Batch, error) {
	b, arrays, err := encodeParts(info, r, needs)
	if err != nil {
		return nil, err
	}
	for _, a := range arrays {
		if a.block != nil { // a column: the message shares it
			a.setFloats(b, a.block)
			continue
		}
		if a.ints != nil {
			out := make([]int32, a.count)
			for i := range a.parts() {
				copy(out[a.start[i]:], a.ints(i))
			}
			a.setInts(b, out)
			continue
		}
		out := make([]float64, a.count)
		for i := range a.parts() {
			a.writePart(out, i)
		}
		a.setFloats(b, out)
	}
	return b, nil
}

// batchArray is one of a Batch's large arrays, before it is placed in the
// message (EncodeBatch) or in shared memory (ShmHost.Encode): its Batch
// field number, its element count, and its content in parts (one a
// sequence), part i starting at element start[i] (start has one entry
// more than there are parts, the count). A part is ints(i) or floats(i).
// block, when not nil, is the whole float array as one column of the
// rollout (core.Rollout.Column): it is handed over as it is.
type batchArray struct {
	field     int32
	count     int
	start     []int
	ints      func(i int) []int32
	floats    func(i int) []float64
	block     []float64
	setInts   func(b *pb.Batch, v []int32)
	setFloats func(b *pb.Batch, v []float64)
}

func (a *batchArray) parts() int { return len(a.start) - 1 }

// writePart copies float part i into dst at its start.
func (a *batchArray) writePart(dst []float64, i int) {
	copy(dst[a.start[i]:], a.floats(i))
}

// partEqual reports whether dst already holds float part i.
func (a *batchArray) partEqual(dst []float64, i int) bool {
	v := a.floats(i)
	return bytes.Equal(bytesOf(v), bytesOf(dst[a.start[i]:a.start[i]+len(v)]))
}

// prefix returns the running sums of f(i) over n parts, times scale: the
// start of every part and, last, the total.
func prefix(n, scale int, f func(i int) int) []int {
	out := make([]int, n+1)
	for i := range n {
		out[i+1] = out[i] + scale*f(i)
	}
	return out
}

// encodeParts is EncodeBatch's message without its large arrays, and the
// arrays, checked.
func encodeParts(info core.StepInfo, r *core.Rollout, needs core.Needs) (*pb.Batch, []batchArray, error) {
	n := len(r.Seqs)
	total := r.NumTokens()
	b := &pb.Batch{Info: InfoToProto(info), RolloutStep: int64(r.Step), RolloutTotalSteps: int64(r.TotalSteps),
		RolloutAlgorithm: r.Algorithm,
		Group:            make([]int32, n), ProblemId: make([]string, n), Reward: make([]float64, n),
		Correct: make([]bool, n), Truncated: make([]bool, n), Text: make([]string, n), Lengths: make([]int32, n),
		PromptLengths: make([]int32, n), RewardBonus: make([]float64, n), ShapedReward: make([]float64, n)}
	promptTotal := 0
	for i := range r.Seqs {
		promptTotal += len(r.Seqs[i].Prompt)
	}
	for i := range r.Seqs {
		s := &r.Seqs[i]
		b.Group[i], b.ProblemId[i], b.Reward[i], b.Correct[i] = int32(s.Group), s.ProblemID, s.Reward, s.Correct
		b.Truncated[i], b.Text[i], b.Lengths[i], b.PromptLengths[i] = s.Truncated, s.Text, int32(s.Len()), int32(len(s.Prompt))
		b.RewardBonus[i], b.ShapedReward[i] = s.RewardBonus, s.ShapedReward
	}
	keys := func(get func(s *core.Sequence) string) []string {
		for i := range r.Seqs {
			if get(&r.Seqs[i]) != "" {
				out := make([]string, n)
				for j := range r.Seqs {
					out[j] = get(&r.Seqs[j])
				}
				return out
			}
		}
		return nil
	}
	b.AnswerKey = keys(func(s *core.Sequence) string { return s.AnswerKey })
	b.SolutionKey = keys(func(s *core.Sequence) string { return s.SolutionKey })
	tokens := prefix(n, 1, func(i int) int { return r.Seqs[i].Len() })
	prompts := prefix(n, 1, func(i int) int { return len(r.Seqs[i].Prompt) })
	arrays := []batchArray{
		{field: 20, count: promptTotal, start: prompts, ints: func(i int) []int32 { return r.Seqs[i].Prompt },
			setInts: func(b *pb.Batch, v []int32) { b.Prompt = v }},
		{field: 21, count: total, start: tokens, ints: func(i int) []int32 { return r.Seqs[i].Response },
			setInts: func(b *pb.Batch, v []int32) { b.Response = v }},
	}
	var err error
	// perToken adds a per-token signal present on some sequence; it must
	// then have T_i entries on every sequence.
	perToken := func(field int32, name string, get func(s *core.Sequence) []float64, set func(b *pb.Batch, v []float64)) {
		if err != nil {
			return
		}
		present := false
		for i := range r.Seqs {
			if len(get(&r.Seqs[i])) > 0 {
				present = true
				break
			}
		}
		if !present {
			return
		}
		for i := range r.Seqs {
			s := &r.Seqs[i]
			if v := get(s); len(v) != s.Len() {
				err = fmt.Errorf("sequence %d has %d %s for %d tokens", i, len(v), name, s.Len())
				return
			}
		}
		block, _ := r.Column(1, get)
		arrays = append(arrays, batchArray{field: field, count: total, start: tokens, setFloats: set, block: block,
			floats: func(i int) []float64 { return get(&r.Seqs[i]) }})
	}
	perToken(30, "log-probs", func(s *core.Sequence) []float64 { return s.LogProbs }, func(b *pb.Batch, v []float64) { b.Logprobs = v })
	if needs.Entropies {
		perToken(31, "entropies", func(s *core.Sequence) []float64 { return s.Entropies }, func(b *pb.Batch, v []float64) { b.Entropies = v })
	}
	perToken(33, "advantages", func(s *core.Sequence) []float64 { return s.Advantages }, func(b *pb.Batch, v []float64) { b.Advantages = v })
	perToken(34, "advantage bonuses", func(s *core.Sequence) []float64 { return s.AdvantageBonus }, func(b *pb.Batch, v []float64) { b.AdvantageBonus = v })
	perToken(35, "returns", func(s *core.Sequence) []float64 { return s.Returns }, func(b *pb.Batch, v []float64) { b.Returns = v })
	if err != nil {
		return nil, nil, err
	}
	if needs.ValueHeads > 0 {
		k := r.ValueHeads
		b.ValueHeads = int32(k)
		present := false
		for i := range r.Seqs {
			present = present || len(r.Seqs[i].Values) > 0
		}
		if present && k > 0 {
			for i := range r.Seqs {
				s := &r.Seqs[i]
				if len(s.Values) != s.Len()*k {
					return nil, nil, fmt.Errorf("sequence %d has %d values for %d tokens x K = %d heads", i, len(s.Values), s.Len(), k)
				}
			}
			get := func(s *core.Sequence) []float64 { return s.Values }
			block, _ := r.Column(k, get)
			arrays = append(arrays, batchArray{field: 32, count: total * k, start: prefix(n, k, func(i int) int { return r.Seqs[i].Len() }),
				setFloats: func(b *pb.Batch, v []float64) { b.Values = v }, block: block,
				floats: func(i int) []float64 { return r.Seqs[i].Values }})
		}
	}
	if needs.Pooling != "" {
		d := 0
		for i := range r.Seqs {
			if len(r.Seqs[i].Embedding) > 0 {
				d = len(r.Seqs[i].Embedding)
				break
			}
		}
		if d > 0 {
			b.EmbeddingDim = int32(d)
			for i := range r.Seqs {
				if e := r.Seqs[i].Embedding; len(e) != d {
					return nil, nil, fmt.Errorf("sequence %d has an embedding of length %d, sequence 0 of %d", i, len(e), d)
				}
			}
			arrays = append(arrays, batchArray{field: 41, count: n * d, start: prefix(n, d, func(int) int { return 1 }),
				setFloats: func(b *pb.Batch, v []float64) { b.Embedding = v },
				floats:    func(i int) []float64 { return r.Seqs[i].Embedding }})
		}
	}
	return b, arrays, nil
}

// DecodeBatch unpacks a Batch into a Rollout (plugin side). Slices share
// the message's arrays (capacity-limited, so appends copy): every
// per-token signal is one column of the rollout (core/columns.go), the
// values flat with their head axis.
func DecodeBatch(b *pb.Batch) (core.StepInfo, *core.Rollout, error) {
	return decodeBatch(b)
}

func decodeBatch(b *pb.Batch) (core.StepInfo, *core.Rollout, error) {
	n := len(b.Lengths)
	for name, l := range map[string]int{"group": len(b.Group), "problem_id": len(b.ProblemId), "reward": len(b.Reward),
		"correct": len(b.Correct), "truncated": len(b.Truncated), "text": len(b.Text), "prompt_lengths": len(b.PromptLengths),
		"reward_bonus": len(b.RewardBonus), "shaped_reward": len(b.ShapedReward)} {
		if l != n {
			return core.StepInfo{}, nil, fmt.Errorf("batch: %s has %d entries for %d sequences", name, l, n)
		}
	}
	for name, l := range map[string]int{"answer_key": len(b.AnswerKey), "solution_key": len(b.SolutionKey)} {
		if l != 0 && l != n {
			return core.StepInfo{}, nil, fmt.Errorf("batch: %s has %d entries for %d sequences (want %d or none)", name, l, n, n)
		}
	}
	total, ptotal := 0, 0
	for i := range n {
		if b.Lengths[i] < 0 || b.PromptLengths[i] < 0 {
			return core.StepInfo{}, nil, fmt.Errorf("batch: negative length at sequence %d", i)
		}
		total += int(b.Lengths[i])
		ptotal += int(b.PromptLengths[i])
	}
	k := int(b.ValueHeads)
	d := int(b.EmbeddingDim)
	check := func(name string, got, want int) error {
		if got != 0 && got != want {
			return fmt.Errorf("batch: %s has %d entries, want %d", name, got, want)
		}
		return nil
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{{"prompt", len(b.Prompt), ptotal}, {"response", len(b.Response), total}, {"logprobs", len(b.Logprobs), total},
		{"entropies", len(b.Entropies), total}, {"values", len(b.Values), total * k}, {"advantages", len(b.Advantages), total},
		{"advantage_bonus", len(b.AdvantageBonus), total}, {"returns", len(b.Returns), total}, {"embedding", len(b.Embedding), n * d}} {
		if err := check(c.name, c.got, c.want); err != nil {
			return core.StepInfo{}, nil, err
		}
	}
	r := &core.Rollout{Step: int(b.RolloutStep), TotalSteps: int(b.RolloutTotalSteps), Algorithm: b.RolloutAlgorithm,
		ValueHeads: k, Seqs: make([]core.Sequence, n)}
	off, poff := 0, 0
	cut := func(a []float64, from, to int) []float64 {
		if len(a) == 0 {
			return nil
		}
		return a[from:to:to]
	}
	for i := range n {
		T, P := int(b.Lengths[i]), int(b.PromptLengths[i])
		s := &r.Seqs[i]
		s.Group, s.ProblemID, s.Reward, s.Correct = int(b.Group[i]), b.ProblemId[i], b.Reward[i], b.Correct[i]
		s.Truncated, s.Text, s.RewardBonus, s.ShapedReward = b.Truncated[i], b.Text[i], b.RewardBonus[i], b.ShapedReward[i]
		if len(b.AnswerKey) > 0 {
			s.AnswerKey = b.AnswerKey[i]
		}
		if len(b.SolutionKey) > 0 {
			s.SolutionKey = b.SolutionKey[i]
		}
		if len(b.Prompt) > 0 {
			s.Prompt = b.Prompt[poff : poff+P : poff+P]
		}
		if len(b.Response) > 0 {
			s.Response = b.Response[off : off+T : off+T]
		} else {
			s.Response = make([]int32, T)
		}
		s.LogProbs = cut(b.Logprobs, off, off+T)
		s.Entropies = cut(b.Entropies, off, off+T)
		s.Advantages = cut(b.Advantages, off, off+T)
		s.AdvantageBonus = cut(b.AdvantageBonus, off, off+T)
		s.Returns = cut(b.Returns, off, off+T)
		s.Values = cut(b.Values, off*k, (off+T)*k)
		if len(b.Embedding) > 0 {
			s.Embedding = b.Embedding[i*d : (i+1)*d : (i+1)*d]
		}
		off += T
		poff += P
	}
	return infoFromProto(b.Info), r, nil
}
