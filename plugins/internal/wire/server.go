package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cde-rl/cde/core"
	pb "github.com/cde-rl/cde/plugins/proto"
)

// SDKName identifies this SDK in Description.sdk.
const SDKName = "cde-go-sdk/1"

// ServeOptions tune Serve; the zero value is what plugin authors want.
type ServeOptions struct {
	// ProtocolVersion overrides the newest protocol version offered (tests
	// of the version negotiation only; 1 serves as a version-1 plugin would,
	// without TokenLoss, 2 as one without shared memory).
	ProtocolVersion int
	// Logger receives go-plugin's own logs (default: JSON on stderr, which
	// the host bridges into its log).
	Logger hclog.Logger
}

// Serve serves the strategies f builds over go-plugin's gRPC transport and
// returns when the host closes the plugin. It is what sdk.Serve calls.
func Serve(f core.StrategyFactory, opts ServeOptions) {
	v := opts.ProtocolVersion
	if v == 0 {
		v = ProtocolVersion
	}
	if opts.Logger == nil {
		opts.Logger = NewPluginLogger("")
	}
	// Every version from the oldest the host side still serves up to v:
	// go-plugin picks the highest the host offers too, so a host that
	// does not speak version 3 (the shared-memory transport) gets 2.
	// (A version beyond this build's, which only the tests of the version
	// mismatch ask for, is offered alone, as a future plugin that dropped
	// the old versions would.)
	versions := map[int]plugin.PluginSet{}
	lo := min(MinProtocolVersion, v)
	if v > ProtocolVersion {
		lo = v
	}
	for u := lo; u <= v; u++ {
		versions[u] = plugin.PluginSet{PluginName: &GRPCPlugin{Factory: f, Version: uint32(u), Logger: opts.Logger}}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: versions,
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(o, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
				grpc.InitialWindowSize(FlowWindow), grpc.InitialConnWindowSize(FlowWindow),
				grpc.ReadBufferSize(1<<20), grpc.WriteBufferSize(1<<20))...)
		},
		Logger: opts.Logger,
	})
}

// NewPluginLogger returns an hclog logger writing JSON lines to the
// process's stderr as it is now (before Serve redirects os.Stderr), which
// the host parses and forwards into its own log with the plugin's name.
func NewPluginLogger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: os.Stderr, JSONFormat: true, Level: hclog.Debug})
}

// stubAlgorithm stands for the host's algorithm inside a plugin: it knows
// the name and whether there is a critic; the advantages are the host's.
type stubAlgorithm struct {
	name   string
	critic bool
}

func (a stubAlgorithm) Name() string      { return a.name }
func (a stubAlgorithm) NeedsCritic() bool { return a.critic }
func (a stubAlgorithm) Advantages(*core.Rollout) error {
	return fmt.Errorf("algorithm %s runs in the host, not in a plugin", a.name)
}
func (a stubAlgorithm) Finalize(*core.Rollout) error {
	return fmt.Errorf("algorithm %s runs in the host, not in a plugin", a.name)
}

// server implements the strategy service over one configured strategy.
type server struct {
	pb.UnimplementedStrategyServer
	factory core.StrategyFactory
	version uint32
	log     hclog.Logger

	mu  sync.Mutex // hooks are called from one goroutine; this guards misuse
	s   core.Strategy
	h   core.Hooks // what s does, asked once at Configure
	shm *shmClient // nil: batches come in the messages
}

func (sv *server) describe() *pb.Description {
	return &pb.Description{ProtocolVersion: sv.version, Name: sv.s.Name(), Needs: needsToProto(sv.s.Needs()),
		Capabilities: capsOf(sv.h, sv.version), Sdk: SDKName, Shm: sv.shm != nil}
}

// acceptShm opens the Configure probe region (version 3); on any failure
// the plugin logs why and takes the batches in the messages.
func (sv *server) acceptShm(probe *pb.ShmRegion) {
	if probe == nil || sv.version < 3 {
		return
	}
	c, err := openProbe(probe)
	if err != nil {
		if sv.log != nil {
			sv.log.Warn("shared-memory transport refused; batches come in the gRPC messages", "error", err.Error())
		}
		return
	}
	sv.shm = c
}

// Describe returns the configured strategy's description.
func (sv *server) Describe(context.Context, *pb.DescribeRequest) (*pb.Description, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.s == nil {
		return nil, status.Error(codes.FailedPrecondition, "not configured yet: call Configure first")
	}
	return sv.describe(), nil
}

// Configure builds the strategy with the factory, reading params strictly.
func (sv *server) Configure(_ context.Context, req *pb.ConfigureRequest) (_ *pb.Description, err error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.s != nil {
		return nil, status.Error(codes.FailedPrecondition, "already configured")
	}
	if sv.factory == nil {
		return nil, status.Error(codes.FailedPrecondition, "no strategy factory")
	}
	m := map[string]any{}
	if req.ParamsJson != "" {
		if err := json.Unmarshal([]byte(req.ParamsJson), &m); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "params: %v", err)
		}
	}
	p := core.NewParams(req.ParamsPath, m)
	var s core.Strategy
	err = protect("Configure", func() error {
		var err error
		if s, err = sv.factory(p, stubAlgorithm{req.Algorithm, req.AlgorithmNeedsCritic}); err != nil {
			return err
		}
		if err := p.Finish(); err != nil {
			return err
		}
		if s == nil {
			return fmt.Errorf("the strategy factory returned nil")
		}
		return core.HooksOf(s).Check()
	})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	sv.s, sv.h = s, core.HooksOf(s)
	sv.acceptShm(req.ShmProbe)
	return sv.describe(), nil
}

// protect runs f, turning a panic into an error with the stack.
func protect(hook string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			// "RewardBonus: panic: ...": the host, seeing the hook named
			// first, does not name it again.
			err = fmt.Errorf("%s: panic: %v\n%s", hook, p, debug.Stack())
		}
	}()
	return f()
}

// hooks returns what the configured strategy does.
func (sv *server) hooks() (core.Hooks, error) {
	if sv.s == nil {
		return core.Hooks{}, status.Error(codes.FailedPrecondition, "not configured yet: call Configure first")
	}
	return sv.h, nil
}

func hookErr(err error) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	return status.Error(codes.Aborted, err.Error())
}

func (sv *server) batchCall(hook string, b *pb.Batch, f func(h core.Hooks, info core.StepInfo, r *core.Rollout) error) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	h, err := sv.hooks()
	if err != nil {
		return err
	}
	if b.Shm != nil {
		if sv.shm == nil {
			return status.Error(codes.InvalidArgument, "batch: arrays in shared memory, but the plugin did not accept the transport at Configure")
		}
		if err := sv.shm.resolve(b); err != nil {
			return status.Error(codes.InvalidArgument, "batch: "+err.Error())
		}
	}
	info, r, err := decodeBatch(b)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if b.GetShm().GetAnswer() != nil {
		// A per-token answer made as one column (core.Rollout.TokenRows)
		// is allocated in the answer region: it is the answer in place.
		r.Alloc = &answerAlloc{c: sv.shm, b: b}
	}
	if err := protect(hook, func() error { return f(h, info, r) }); err != nil {
		return hookErr(err)
	}
	return nil
}

func unimplemented(hook string) error {
	return status.Errorf(codes.Unimplemented, "the strategy does not implement %s", hook)
}

// RewardBonus calls core.RewardHook.
func (sv *server) RewardBonus(_ context.Context, b *pb.Batch) (*pb.RewardBonusResponse, error) {
	out := &pb.RewardBonusResponse{}
	err := sv.batchCall("RewardBonus", b, func(h core.Hooks, info core.StepInfo, r *core.Rollout) error {
		if h.RewardBonus == nil {
			return unimplemented("RewardBonus")
		}
		bonus, err := h.RewardBonus(info, r)
		out.Bonus = bonus
		return err
	})
	return out, err
}

// AdvantageBonus calls core.AdvantageHook; rows are concatenated.
func (sv *server) AdvantageBonus(_ context.Context, b *pb.Batch) (*pb.AdvantageBonusResponse, error) {
	out := &pb.AdvantageBonusResponse{}
	err := sv.batchCall("AdvantageBonus", b, func(h core.Hooks, info core.StepInfo, r *core.Rollout) error {
		if h.AdvantageBonus == nil {
			return unimplemented("AdvantageBonus")
		}
		rows, err := h.AdvantageBonus(info, r)
		if err != nil {
			return err
		}
		n := 0
		for _, row := range rows {
			n += len(row)
		}
		out.Lengths = make([]int32, len(rows))
		for i, row := range rows {
			out.Lengths[i] = int32(len(row))
		}
		dst, err := sv.shm.answer(b, n)
		if err != nil {
			return err
		}
		if dst != nil {
			out.InShm = true
		} else {
			dst = make([]float64, n)
		}
		gather(dst, rows)
		if !out.InShm {
			out.Bonus = dst
		}
		return nil
	})
	return out, err
}

// LossTerms calls core.LossHook.
func (sv *server) LossTerms(_ context.Context, info *pb.StepInfo) (*pb.LossTermsResponse, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	h, err := sv.hooks()
	if err != nil {
		return nil, err
	}
	if h.LossTerms == nil {
		return nil, unimplemented("LossTerms")
	}
	var lt core.LossTerms
	if err := protect("LossTerms", func() (err error) { lt, err = h.LossTerms(infoFromProto(info)); return }); err != nil {
		return nil, hookErr(err)
	}
	return &pb.LossTermsResponse{EntropyCoef: lt.EntropyCoef}, nil
}

// TokenLoss calls core.TokenLossHook (protocol version 2); per-token
// weights are packed like the batch's signals.
func (sv *server) TokenLoss(_ context.Context, b *pb.Batch) (*pb.TokenLossResponse, error) {
	out := &pb.TokenLossResponse{}
	if sv.version < 2 {
		return nil, status.Errorf(codes.Unimplemented, "TokenLoss needs protocol version 2; this plugin serves version %d", sv.version)
	}
	err := sv.batchCall("TokenLoss", b, func(h core.Hooks, info core.StepInfo, r *core.Rollout) error {
		if h.TokenLoss == nil {
			return unimplemented("TokenLoss")
		}
		tl, err := h.TokenLoss(info, r)
		if err != nil {
			return err
		}
		// Packed, rows lose their lengths: check the shape here, with the
		// checks the host applies again.
		if err := core.CheckTokenLoss(r.SeqLens(), tl); err != nil {
			return fmt.Errorf("token loss: %w", err)
		}
		total := r.NumTokens()
		// In shared memory: pg_weight from 0, abs_kl_coef from total.
		region, err := sv.shm.answer(b, 2*total)
		if err != nil {
			return err
		}
		pack := func(rows [][]float64, at int) []float64 {
			if rows == nil {
				return nil
			}
			if region != nil {
				gather(region[at:at+total], rows)
				return nil
			}
			flat := make([]float64, total)
			gather(flat, rows)
			return flat
		}
		out.InShm = region != nil
		out.HasPgWeight, out.PgWeight = tl.PGWeight != nil, pack(tl.PGWeight, 0)
		out.HasAbsKlCoef, out.AbsKlCoef = tl.AbsKLCoef != nil, pack(tl.AbsKLCoef, total)
		out.EntropyCoef = tl.EntropyCoef
		return nil
	})
	return out, err
}

// HeadMasks calls core.HeadMasker; masks are concatenated row-major.
func (sv *server) HeadMasks(_ context.Context, b *pb.Batch) (*pb.HeadMasksResponse, error) {
	out := &pb.HeadMasksResponse{}
	err := sv.batchCall("HeadMasks", b, func(h core.Hooks, info core.StepInfo, r *core.Rollout) error {
		if h.HeadMasks == nil {
			return unimplemented("HeadMasks")
		}
		masks, err := h.HeadMasks(info, r)
		if err != nil {
			return err
		}
		// Packed row-major, a mask loses its rows' widths: check the
		// shape here, with the checks the host applies again.
		if err := core.CheckHeadMasks(r.SeqLens(), masks, r.ValueHeads); err != nil {
			return fmt.Errorf("head masks: %w", err)
		}
		out.Rows = make([]int32, len(masks))
		n := 0
		for i, m := range masks {
			if r.ValueHeads > 0 {
				out.Rows[i] = int32(len(m) / r.ValueHeads)
			}
			n += len(m)
		}
		dst, err := sv.shm.answer(b, n)
		if err != nil {
			return err
		}
		out.InShm = dst != nil
		if dst == nil {
			dst = make([]float64, n)
		}
		gather(dst, masks)
		if !out.InShm {
			out.Masks = dst
		}
		return nil
	})
	return out, err
}

// Observe calls core.Observer.
func (sv *server) Observe(_ context.Context, b *pb.Batch) (*pb.ObserveResponse, error) {
	out := &pb.ObserveResponse{}
	err := sv.batchCall("Observe", b, func(h core.Hooks, info core.StepInfo, r *core.Rollout) error {
		if h.Observe == nil {
			return unimplemented("Observe")
		}
		m, err := h.Observe(info, r)
		out.Metrics = m
		return err
	})
	return out, err
}

// SaveState calls core.Stateful.SaveState.
func (sv *server) SaveState(context.Context, *pb.SaveStateRequest) (*pb.State, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	h, err := sv.hooks()
	if err != nil {
		return nil, err
	}
	if h.SaveState == nil {
		return nil, unimplemented("SaveState")
	}
	var data []byte
	if err := protect("SaveState", func() (err error) { data, err = h.SaveState(); return }); err != nil {
		return nil, hookErr(err)
	}
	return &pb.State{Data: data}, nil
}

// LoadState calls core.Stateful.LoadState.
func (sv *server) LoadState(_ context.Context, st *pb.State) (*pb.LoadStateResponse, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	h, err := sv.hooks()
	if err != nil {
		return nil, err
	}
	if h.LoadState == nil {
		return nil, unimplemented("LoadState")
	}
	if err := protect("LoadState", func() error { return h.LoadState(st.Data) }); err != nil {
		return nil, hookErr(err)
	}
	return &pb.LoadStateResponse{}, nil
}

func SortedMetricNames(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// answerAlloc is a plugin-side core.Allocator that hands out the batch's
// answer region once, from its start: the first block a hook allocates
// there (its answer made with TokenRows) is written where the host reads
// it. Later blocks, and blocks larger than the region, come from the heap.
type answerAlloc struct {
	c    *shmClient
	b    *pb.Batch
	used bool
}

func (a *answerAlloc) Float64s(n int) []float64 {
	if a.used {
		return nil
	}
	a.used = true
	v, err := a.c.answer(a.b, n)
	if err != nil || v == nil {
		return nil
	}
	clear(v)
	return v
}

// gather writes rows end to end into dst (which holds their total length).
// A row already at its place (an answer allocated in the region) is not
// copied; when some row lies elsewhere in dst's memory, every row is first
// copied out, so that no write overtakes a row still to be read.
func gather(dst []float64, rows [][]float64) {
	if len(dst) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(&dst[0]))
	hi := lo + 8*uintptr(len(dst))
	pos, inPlace, overlap := 0, true, false
	for _, row := range rows {
		if len(row) > 0 {
			p := uintptr(unsafe.Pointer(&row[0]))
			if p != lo+8*uintptr(pos) {
				inPlace = false
				if p < hi && p+8*uintptr(len(row)) > lo {
					overlap = true
				}
			}
		}
		pos += len(row)
	}
	if inPlace {
		return
	}
	if overlap {
		cp := make([][]float64, len(rows))
		for i, row := range rows {
			cp[i] = slices.Clone(row)
		}
		rows = cp
	}
	pos = 0
	for _, row := range rows {
		pos += copy(dst[pos:], row)
	}
}
