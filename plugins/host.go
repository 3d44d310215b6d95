package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins/internal/wire"
	pb "github.com/cde-rl/cde/plugins/proto"
)

// hostMaxVersion is the newest protocol version the host offers (tests
// lower it to stand for a host from before a version).
var hostMaxVersion = ProtocolVersion

// Default timeouts of Config.
const (
	DefaultStartTimeout = 10 * time.Second
	DefaultCallTimeout  = 30 * time.Second
)

// Config says how to start and configure one plugin.
type Config struct {
	// Path is the plugin executable.
	Path string
	// Params is the entry's params mapping, passed to the plugin's factory;
	// ParamsPath prefixes its keys in errors (e.g. "strategies[2].params").
	Params     map[string]any
	ParamsPath string
	// Algorithm is the configured algorithm (its name and whether it has a
	// critic are passed to the factory).
	Algorithm core.Algorithm
	// SHA256, when set, pins the binary: a hex digest (optionally prefixed
	// "sha256:"); a mismatch refuses to start it.
	SHA256 string
	// StartTimeout bounds the start and handshake (default 10s);
	// CallTimeout bounds every call (default 30s).
	StartTimeout time.Duration
	CallTimeout  time.Duration
	// Weight is a `weight:` schedule, nil for none, for a program that
	// calls a plugin strategy outside the trainer: cde-run leaves it nil,
	// since the trainer applies every entry's weight itself
	// (trainer.Trainer.Weights). The host evaluates w_t at each call's step and multiplies what
	// the plugin returns by it: reward bonuses, advantage bonuses and the
	// entropy coefficient (head masks are not scaled); Observe then also
	// reports explore/<name>/weight = w_t. The plugin itself never sees
	// w_t (the protocol has no field for it): it computes its unweighted
	// bonus, exactly like an in-tree strategy's bonus before its w_t.
	Weight core.Schedule
	// Transport is how batches reach the plugin: "auto" (the default, ""
	// too) moves the large arrays through shared memory when the plugin
	// speaks protocol version 3 and can map the host's regions, and uses
	// the gRPC messages otherwise; "messages" always uses the messages.
	Transport string
	// Log receives the plugin's logs and the host's messages about it.
	Log zerolog.Logger
}

// The values of Config.Transport.
const (
	TransportAuto     = "auto"
	TransportMessages = "messages"
)

// Plugin is the host side of one plugin process. The strategy returned by
// Open embeds it; Close kills the process.
type Plugin struct {
	cfg    Config
	client *plugin.Client // nil for Connect
	cmd    *exec.Cmd
	runner *procRunner // nil for Connect
	rpc    pb.StrategyClient
	stderr *tail
	log    zerolog.Logger
	// tag names the plugin in log lines: the executable's file name
	// ("brevity", "brevity.py"), known before the plugin says its name.
	tag string
	// killing is set once the host kills the plugin on purpose; go-plugin's
	// "plugin failed to exit gracefully" is then not logged.
	killing atomic.Bool

	name  string
	needs core.Needs
	caps  capabilities
	sdk   string
	// version is the protocol version the plugin reported in Configure.
	version int
	// shm is the shared-memory transport, nil when batches go in the
	// messages.
	shm *wire.ShmHost

	mu     sync.Mutex
	failed error
	closed bool
}

// Open starts the plugin at cfg.Path, negotiates the protocol, configures
// it with cfg.Params and returns it as a core.Strategy whose core.Hooks
// (it is a core.HookProvider) are exactly the hooks the plugin declared,
// plus Close. On any error the process is gone.
func Open(cfg Config) (core.Strategy, error) {
	p, err := start(cfg)
	if err != nil {
		return nil, err
	}
	return strategy{p}, nil
}

// Connect configures a strategy service reached over an existing
// connection (an in-process test connection, for instance) and wraps it
// like Open; cfg.Path only names it in errors.
func Connect(rpc pb.StrategyClient, cfg Config) (core.Strategy, error) {
	cfg = cfg.withDefaults()
	if err := checkTransport(cfg.Transport); err != nil {
		return nil, err
	}
	p := &Plugin{cfg: cfg, rpc: rpc, stderr: &tail{}, log: cfg.Log, tag: filepath.Base(cfg.Path)}
	if err := p.configure(); err != nil {
		return nil, err
	}
	return strategy{p}, nil
}

// strategy is a plugin as a core.Strategy: its hooks (core.HookProvider)
// are the ones the plugin declared, plus Observe when the entry has a
// weight (to report w_t), plus Close.
type strategy struct{ p *Plugin }

func (s strategy) Name() string          { return s.p.Name() }
func (s strategy) Needs() core.Needs     { return s.p.Needs() }
func (s strategy) Close() error          { return s.p.Close() }
func (s strategy) pluginHandle() *Plugin { return s.p }

// Hooks implements core.HookProvider: one function per declared hook.
func (s strategy) Hooks() core.Hooks {
	p, c := s.p, s.p.caps
	if p.cfg.Weight != nil {
		c |= wire.CapObserve
	}
	h := core.Hooks{Close: p.Close}
	if c&wire.CapReward != 0 {
		h.RewardBonus = p.rewardBonus
	}
	if c&wire.CapAdvantage != 0 {
		h.AdvantageBonus = p.advantageBonus
	}
	if c&wire.CapLoss != 0 {
		h.LossTerms = p.lossTerms
	}
	if c&wire.CapTokenLoss != 0 {
		h.TokenLoss = p.tokenLoss
	}
	if c&wire.CapHeadMasks != 0 {
		h.HeadMasks = p.headMasks
	}
	if c&wire.CapObserve != 0 {
		h.Observe = p.observe
	}
	if c&wire.CapState != 0 {
		h.SaveState, h.LoadState = p.saveState, p.loadState
	}
	return h
}

// Of returns the Plugin behind a strategy made by Open or Connect.
func Of(s core.Strategy) (*Plugin, bool) {
	h, ok := s.(interface{ pluginHandle() *Plugin })
	if !ok {
		return nil, false
	}
	return h.pluginHandle(), true
}

func (c Config) withDefaults() Config {
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.ParamsPath == "" {
		c.ParamsPath = "params"
	}
	if c.Transport == "" {
		c.Transport = TransportAuto
	}
	return c
}

// FileSHA256 is the hex SHA-256 of a file (what the sha256: key pins).
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkBinary reports a missing, non-regular or non-executable file, a
// script whose #! interpreter cannot be run, and a checksum mismatch,
// before anything is started.
func checkBinary(cfg Config) (pin []byte, err error) {
	st, err := os.Stat(cfg.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if ext := filepath.Ext(cfg.Path); ext == ".py" || ext == ".js" {
				return nil, fmt.Errorf("plugin %s: script not found (fix the path)", cfg.Path)
			}
			return nil, fmt.Errorf("plugin %s: binary not found (build it with go build, or fix the path)", cfg.Path)
		}
		return nil, fmt.Errorf("plugin %s: %w", cfg.Path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("plugin %s: not a regular file (%s)", cfg.Path, st.Mode())
	}
	if st.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("plugin %s: not executable (mode %s; chmod +x it)", cfg.Path, st.Mode().Perm())
	}
	if err := interpreterMissing(cfg.Path); err != nil {
		return nil, err
	}
	if cfg.SHA256 == "" {
		return nil, nil
	}
	want := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(cfg.SHA256), "sha256:"))
	pin, err = hex.DecodeString(want)
	if err != nil || len(pin) != sha256.Size {
		return nil, fmt.Errorf("plugin %s: sha256: want 64 hex digits, got %q", cfg.Path, cfg.SHA256)
	}
	got, err := FileSHA256(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", cfg.Path, err)
	}
	if got != want {
		return nil, fmt.Errorf("plugin %s: sha256 mismatch: the binary's digest is %s but the config pins %s; refusing to start it", cfg.Path, got, want)
	}
	return pin, nil
}

func start(cfg Config) (*Plugin, error) {
	cfg = cfg.withDefaults()
	if err := checkTransport(cfg.Transport); err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(cfg.Path); err == nil {
		cfg.Path = abs
	}
	// checkBinary also checks the sha256 pin (go-plugin's SecureConfig
	// cannot be combined with RunnerFunc).
	if _, err := checkBinary(cfg); err != nil {
		return nil, err
	}
	label := filepath.Base(cfg.Path)
	p := &Plugin{cfg: cfg, stderr: &tail{}, log: cfg.Log, tag: label}
	cc := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: wire.HostVersionsUpTo(hostMaxVersion),
		// go-plugin fills spec with the environment (magic cookie, protocol
		// versions, AutoMTLS client certificate); procRunner runs the plugin.
		RunnerFunc: func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
			cmd := exec.Command(cfg.Path)
			cmd.Env = spec.Env
			p.cmd, p.runner = cmd, newProcRunner(cmd, cfg.Log, label)
			return p.runner, nil
		},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     cfg.StartTimeout,
		Logger:           newHCLogBridge(cfg.Log, label, &p.killing),
		Stderr:           p.stderr,
		SyncStdout:       &lineWriter{log: cfg.Log, plugin: label, stream: "stdout"},
		SyncStderr:       &lineWriter{log: cfg.Log, plugin: label, stream: "stderr", tail: p.stderr},
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(wire.CallOptions()...),
			grpc.WithInitialWindowSize(wire.FlowWindow), grpc.WithInitialConnWindowSize(wire.FlowWindow),
			grpc.WithReadBufferSize(1 << 20), grpc.WithWriteBufferSize(1 << 20)},
	}
	p.client = plugin.NewClient(cc)
	fail := func(err error) (*Plugin, error) {
		p.kill()
		return nil, err
	}
	proto, err := p.client.Client()
	if err != nil {
		msg := err.Error()
		line, printed, silent := "", false, false
		if p.runner != nil {
			line, printed = p.runner.notHandshake()
			_, hasLine := p.runner.firstLine()
			silent = !hasLine && p.runner.ID() != "" // it started, then said nothing
		}
		// Kill first: go-plugin's cleanup waits for its stderr reader, so
		// the stderr tail quoted below is complete, and the exit status
		// is known.
		p.kill()
		switch {
		case printed:
			if len(line) > 200 {
				line = line[:200] + "..."
			}
			err = fmt.Errorf("plugin %s: failed to start: it printed %q on stdout before the handshake; %s "+
				"(the first line on stdout must be go-plugin's handshake line; a program that is not a plugin fails this way too)", cfg.Path, line, printAdvice(cfg.Path))
		case strings.Contains(strings.ToLower(msg), "incompatible api version"):
			err = fmt.Errorf("plugin %s: protocol version mismatch: this cde-run speaks strategy protocol versions %d to %d; %s (rebuild the plugin against a matching plugins/sdk)",
				cfg.Path, MinProtocolVersion, ProtocolVersion, firstLine(msg))
		case strings.Contains(msg, "timeout while waiting for plugin to start"):
			err = fmt.Errorf("plugin %s: did not complete the handshake within %s (start_timeout)", cfg.Path, cfg.StartTimeout)
		case silent:
			// The process ended (or closed its stdout) without a word on
			// stdout: go-plugin says "Unrecognized remote plugin message: ".
			how := "closed its stdout before the handshake"
			if p.cmd != nil && p.cmd.ProcessState != nil {
				how = "exited before the handshake (" + p.cmd.ProcessState.String() + ")"
			}
			err = fmt.Errorf("plugin %s: %s", cfg.Path, how)
			if why := pythonImportError(cfg.Path, p.stderr.String()); why != "" {
				err = fmt.Errorf("%w: %s", err, why)
			}
		case strings.Contains(msg, "exec format error"):
			err = fmt.Errorf("plugin %s: failed to start: not a program this system runs (a script needs a #! line naming its interpreter): %s", cfg.Path, firstLine(msg))
		default:
			err = fmt.Errorf("plugin %s: failed to start: %s", cfg.Path, firstLine(msg))
		}
		// The lines that say what happened first, then the last ones.
		if cause, last := p.stderr.Summary(); cause != "" || last != "" {
			t := cause
			if cause != "" && last != "" {
				t += " | ... | "
			}
			err = fmt.Errorf("%w; plugin stderr: %s", err, t+last)
		}
		return nil, err
	}
	raw, err := proto.Dispense(PluginName)
	if err != nil {
		return fail(fmt.Errorf("plugin %s: %w", cfg.Path, err))
	}
	rpc, ok := raw.(pb.StrategyClient)
	if !ok {
		return fail(fmt.Errorf("plugin %s: dispensed %T, not a strategy client", cfg.Path, raw))
	}
	p.rpc = rpc
	if err := p.configure(); err != nil {
		p.shutdown() // a params error: the plugin is healthy (a broken answer killed it already)
		return nil, err
	}
	p.log.Info().Str("plugin", p.tag).Str("strategy", p.name).Str("path", cfg.Path).Int("pid", p.Pid()).Str("hooks", p.caps.String()).
		Int("protocol", p.client.NegotiatedVersion()).Str("transport", p.Transport()).Str("sdk", p.sdk).Msg("plugin started")
	return p, nil
}

func checkTransport(t string) error {
	if t != TransportAuto && t != TransportMessages {
		return fmt.Errorf("plugin transport %q: want %s or %s", t, TransportAuto, TransportMessages)
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// configure sends Configure and checks the description.
func (p *Plugin) configure() error {
	pj, err := json.Marshal(p.cfg.Params)
	if err != nil {
		return fmt.Errorf("config: %s: cannot encode as JSON for the plugin: %w", p.cfg.ParamsPath, err)
	}
	if p.cfg.Params == nil {
		pj = []byte("{}")
	}
	req := &pb.ConfigureRequest{ParamsJson: string(pj), ParamsPath: p.cfg.ParamsPath}
	if p.cfg.Algorithm != nil {
		req.Algorithm, req.AlgorithmNeedsCritic = p.cfg.Algorithm.Name(), p.cfg.Algorithm.NeedsCritic()
	}
	// The shared-memory offer (version 3): a probe region the plugin maps
	// to show it can. A host that cannot make one offers nothing.
	var probe *wire.HostRegion
	if p.cfg.Transport == TransportAuto && wire.ShmSupported && (p.negotiated() == 0 || p.negotiated() >= 3) {
		var err error
		if probe, err = wire.NewShmProbe(); err != nil {
			p.log.Warn().Err(err).Str("plugin", p.tag).Msg("no shared-memory transport; batches go in the gRPC messages")
		} else {
			req.ShmProbe = &pb.ShmRegion{Path: probe.Path, Size: uint64(len(probe.Mem)), Id: probe.ID}
		}
	}
	accepted := false
	defer func() {
		if !accepted {
			probe.Close()
		}
	}()
	var d *pb.Description
	err = p.call("Configure", func(ctx context.Context) (err error) {
		d, err = p.rpc.Configure(ctx, req, wire.CallOptions()...)
		return err
	})
	if err != nil {
		if status.Code(errors.Unwrap(err)) == codes.InvalidArgument {
			// A config error from the factory: report it as the factory wrote it.
			return fmt.Errorf("%s (plugin %s)", status.Convert(errors.Unwrap(err)).Message(), p.cfg.Path)
		}
		return err
	}
	if want := p.negotiated(); want != 0 && int(d.ProtocolVersion) != want {
		return p.broken(fmt.Errorf("Configure: the plugin reports protocol version %d, but version %d was negotiated", d.ProtocolVersion, want))
	}
	if d.ProtocolVersion < MinProtocolVersion || d.ProtocolVersion > ProtocolVersion {
		return p.broken(fmt.Errorf("Configure: the plugin reports protocol version %d, want %d to %d", d.ProtocolVersion, MinProtocolVersion, ProtocolVersion))
	}
	if d.ProtocolVersion < 2 && d.Capabilities != nil && d.Capabilities.TokenLoss {
		return p.broken(fmt.Errorf("Configure: the plugin declares token_loss, which protocol version %d does not carry (2 does)", d.ProtocolVersion))
	}
	if d.ProtocolVersion < 3 && d.Shm {
		return p.broken(fmt.Errorf("Configure: the plugin accepts the shared-memory transport, which protocol version %d does not carry (3 does)", d.ProtocolVersion))
	}
	if d.Shm && req.ShmProbe == nil {
		return p.broken(errors.New("Configure: the plugin accepts a shared-memory transport the host did not offer"))
	}
	if d.Shm {
		accepted = true
		p.shm = wire.NewShmHost(probe)
	}
	p.version = int(d.ProtocolVersion)
	if d.Name == "" {
		return p.broken(errors.New("Configure: the plugin reports an empty strategy name"))
	}
	p.name, p.needs, p.caps, p.sdk = d.Name, wire.NeedsFromProto(d.Needs), wire.CapsFromProto(d.Capabilities), d.Sdk
	switch p.needs.Pooling {
	case "", "last", "second_last", "mean":
	default:
		return p.broken(fmt.Errorf("Configure: needs pooling %q (want last, second_last or mean)", p.needs.Pooling))
	}
	if p.needs.ValueHeads < 0 {
		return p.broken(fmt.Errorf("Configure: needs %d value heads", p.needs.ValueHeads))
	}
	if p.needs.MinGroup < 0 {
		return p.broken(fmt.Errorf("Configure: needs min_group %d (want 0 for none, or a least group size)", p.needs.MinGroup))
	}
	if p.needs.MinGroup > 0 {
		p.needs.MinGroupKey = minGroupKey(p.needs.MinGroupKey, p.cfg.ParamsPath)
	}
	return nil
}

// minGroupKey is the config key an error about a plugin's min_group names:
// a bare params key ("k") under the entry's params path
// ("strategies[2].params.k"), a full key ("algorithm.k") as it is, and
// none the params path itself.
func minGroupKey(key, paramsPath string) string {
	switch {
	case key == "":
		return paramsPath + " (the plugin's min_group)"
	case strings.ContainsAny(key, ".["):
		return key
	}
	return paramsPath + "." + key
}

// Name is the strategy name the plugin declared.
func (p *Plugin) Name() string { return p.name }

// Needs are the needs the plugin declared.
func (p *Plugin) Needs() core.Needs { return p.needs }

// Path is the plugin executable.
func (p *Plugin) Path() string { return p.cfg.Path }

// Pid is the plugin process id (0 when not a process).
func (p *Plugin) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Hooks lists the hooks the plugin declared, e.g. "reward_bonus,observe".
func (p *Plugin) Hooks() string { return p.caps.String() }

// Close kills the plugin process (idempotent).
func (p *Plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		if p.shm != nil {
			p.log.Info().Str("plugin", p.tag).Int64("in_place_bytes", p.shm.InPlace).Int64("written_bytes", p.shm.Written).
				Int64("kept_bytes", p.shm.Kept).Msg("shared-memory transport: bytes handed over in place, written, and found unchanged")
		}
		p.shutdown()
		p.releaseShm()
	}
	return nil
}

// kill ends the plugin after a failure: SIGKILL to its whole process
// group first (so no step below waits on a live, hung or stopped plugin,
// and no child it started survives), then go-plugin's cleanup, bounded by
// killWait.
func (p *Plugin) kill() {
	p.killing.Store(true)
	if p.runner != nil {
		p.runner.Kill(context.Background())
	}
	if !p.cleanup() {
		p.log.Warn().Str("plugin", p.tag).Dur("waited", killWait).
			Msg("plugin cleanup did not finish; its process group was killed, going on without it")
	}
}

// shutdown ends a healthy plugin (Close): go-plugin's graceful shutdown
// (the controller's Shutdown call; the plugin exits, and its group is
// killed then), falling back to kill when that does not finish within
// killWait.
func (p *Plugin) shutdown() {
	if p.client == nil {
		return
	}
	if p.cleanup() {
		return
	}
	p.log.Warn().Str("plugin", p.tag).Dur("waited", killWait).Msg("plugin did not shut down; killing its process group")
	p.kill()
}

// cleanup runs go-plugin's Client.Kill, waiting at most killWait; it
// reports whether it finished. Client.Kill first asks the plugin to shut
// down, and that call has no deadline: a plugin that never answers would
// block it until its process is killed.
func (p *Plugin) cleanup() bool {
	if p.client == nil {
		return true
	}
	done := make(chan struct{})
	go func() {
		p.client.Kill()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(killWait):
		return false
	}
}

// label names the plugin in errors: "plugin NAME (PATH)".
func (p *Plugin) label() string {
	if p.name == "" {
		return "plugin " + p.cfg.Path
	}
	return fmt.Sprintf("plugin %s (%s)", p.name, p.cfg.Path)
}

// broken records a failure that makes the plugin unusable, kills it and
// returns the error naming the plugin.
func (p *Plugin) broken(err error) error {
	err = fmt.Errorf("%s: %w", p.label(), err)
	if p.failed == nil {
		p.failed = err
	}
	p.kill()
	p.releaseShm()
	return err
}

func (p *Plugin) exitedNow() bool { return p.client != nil && p.client.Exited() }

// exitStatus waits briefly for the process to be reaped and describes how
// it ended ("" when it is still running).
func (p *Plugin) exitStatus() string {
	if p.client == nil {
		return ""
	}
	deadline := time.Now().Add(2 * time.Second)
	for !p.client.Exited() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !p.client.Exited() {
		return ""
	}
	if p.cmd.ProcessState != nil {
		return p.cmd.ProcessState.String()
	}
	return "exited"
}

// call runs one RPC under the call deadline. Transport failures (the
// process died, the deadline passed, a message too large) make the plugin
// unusable and kill it; an error the strategy itself returned is passed on
// (wrapped, unwrappable to the gRPC status) and the process stays.
func (p *Plugin) call(hook string, f func(ctx context.Context) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("%s: %s after Close", p.label(), hook)
	}
	if p.failed != nil {
		return fmt.Errorf("%s: %s: unusable after an earlier failure: %w", p.label(), hook, p.failed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CallTimeout)
	defer cancel()
	err := f(ctx)
	if err == nil {
		return nil
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Aborted, codes.InvalidArgument, codes.FailedPrecondition, codes.Unimplemented:
		return &strategyError{msg: p.label() + ": " + hookMessage(hook, st), status: err}
	}
	if st.Code() == codes.DeadlineExceeded && !p.exitedNow() || errors.Is(ctx.Err(), context.DeadlineExceeded) && !p.exitedNow() {
		return p.broken(fmt.Errorf("%s: no answer within %s (call_timeout); killed the plugin process", hook, p.cfg.CallTimeout))
	}
	if exit := p.exitStatus(); exit != "" {
		msg := fmt.Sprintf("%s: the plugin process died (%s)", hook, exit)
		if t := p.stderr.quote(); t != "" {
			msg += "; " + t
		}
		return p.broken(errors.New(msg))
	}
	if st.Code() == codes.ResourceExhausted {
		return p.broken(fmt.Errorf("%s: message larger than the gRPC limit (%d bytes): %s", hook, MaxMessageSize, st.Message()))
	}
	return p.broken(fmt.Errorf("%s: %w", hook, err))
}

// strategyError is an error the strategy itself returned: it reads
// "plugin NAME (PATH): HOOK: MESSAGE", without gRPC's "rpc error: code =
// ... desc =", and unwraps to the gRPC status.
type strategyError struct {
	msg    string
	status error
}

func (e *strategyError) Error() string { return e.msg }
func (e *strategyError) Unwrap() error { return e.status }

// hookMessage is the status's message prefixed with the hook, unless the
// message starts with the hook's name already, as the Python SDK's do
// ("reward_bonus: entry 3 is nan, not finite"): either way the hook is
// named once.
func hookMessage(hook string, st *status.Status) string {
	msg := st.Message()
	if msg == "" {
		msg = "failed with status " + st.Code().String()
	}
	for _, name := range []string{hook, snakeCase(hook)} {
		if rest, ok := strings.CutPrefix(msg, name); ok && rest != "" && strings.ContainsRune(":.[", rune(rest[0])) {
			return msg
		}
	}
	return hook + ": " + msg
}

// snakeCase is a hook's name as the Python SDK spells it: RewardBonus ->
// reward_bonus.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if 'A' <= r && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (p *Plugin) invalid(hook, format string, args ...any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken(fmt.Errorf("%s returned invalid output: %s", hook, fmt.Sprintf(format, args...)))
}

// batch encodes r for hook; with the shared-memory transport,
// answerValues > 0 also asks for an answer region of that many float64s.
func (p *Plugin) batch(hook string, info core.StepInfo, r *core.Rollout, answerValues int) (*pb.Batch, error) {
	var b *pb.Batch
	var err error
	p.mu.Lock()
	if p.shm != nil && !p.closed && p.failed == nil {
		b, err = p.shm.Encode(info, r, p.needs, answerValues*8)
	} else {
		b, err = wire.EncodeBatch(info, r, p.needs)
	}
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %s: cannot send the batch: %w", p.label(), hook, err)
	}
	return b, nil
}

func (p *Plugin) rewardBonus(info core.StepInfo, r *core.Rollout) ([]float64, error) {
	b, err := p.batch("RewardBonus", info, r, 0)
	if err != nil {
		return nil, err
	}
	var resp *pb.RewardBonusResponse
	if err := p.call("RewardBonus", func(ctx context.Context) (err error) {
		resp, err = p.rpc.RewardBonus(ctx, b, wire.CallOptions()...)
		return
	}); err != nil {
		return nil, err
	}
	out, err := checkRewardBonus(resp.Bonus, len(r.Seqs), p.weight(info))
	if err != nil {
		return nil, p.invalid("RewardBonus", "%v", err)
	}
	return out, nil
}

func (p *Plugin) advantageBonus(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	b, err := p.batch("AdvantageBonus", info, r, r.NumTokens())
	if err != nil {
		return nil, err
	}
	var resp *pb.AdvantageBonusResponse
	if err := p.call("AdvantageBonus", func(ctx context.Context) (err error) {
		resp, err = p.rpc.AdvantageBonus(ctx, b, wire.CallOptions()...)
		return
	}); err != nil {
		return nil, err
	}
	// The bonuses the plugin says it wrote: sum(lengths), which the check
	// below compares with the batch (a negative length reads none).
	n := 0
	for _, l := range resp.Lengths {
		n += max(int(l), 0)
	}
	bonus, err := p.answerView(resp.InShm, resp.Bonus, n)
	if err != nil {
		return nil, p.invalid("AdvantageBonus", "%v", err)
	}
	inShm := resp.InShm
	if inShm && n == r.NumTokens() {
		// Copied out of the answer region into a column of the rollout
		// (the arena in a training run, whose pages stay mapped).
		block, _ := r.TokenRows(1)
		copy(block, bonus)
		bonus, inShm = block, false
	}
	out, err := checkAdvantageBonus(resp.Lengths, bonus, r.SeqLens(), p.weight(info), inShm)
	if err != nil {
		return nil, p.invalid("AdvantageBonus", "%v", err)
	}
	return out, nil
}

func (p *Plugin) lossTerms(info core.StepInfo) (core.LossTerms, error) {
	var resp *pb.LossTermsResponse
	if err := p.call("LossTerms", func(ctx context.Context) (err error) {
		resp, err = p.rpc.LossTerms(ctx, wire.InfoToProto(info), wire.CallOptions()...)
		return
	}); err != nil {
		return core.LossTerms{}, err
	}
	coef, err := checkLossTerms(resp.EntropyCoef, p.weight(info))
	if err != nil {
		return core.LossTerms{}, p.invalid("LossTerms", "%v", err)
	}
	return core.LossTerms{EntropyCoef: coef}, nil
}

// answer returns a hook's per-token answer: the message's values, or with
// inShm n values copied out of the answer region (the message's array must
// then be empty; n beyond the region is an error).
func (p *Plugin) answer(inShm bool, msg []float64, n int) ([]float64, error) {
	v, err := p.answerView(inShm, msg, n)
	if err != nil || !inShm {
		return v, err
	}
	return slices.Clone(v), nil
}

// answerView is answer without the copy: with inShm, a view of the answer
// region, valid until the next call (copy what is kept).
func (p *Plugin) answerView(inShm bool, msg []float64, n int) ([]float64, error) {
	if !inShm {
		return msg, nil
	}
	if len(msg) != 0 {
		return nil, fmt.Errorf("in_shm is set but the message carries %d values too", len(msg))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shm == nil {
		return nil, errors.New("in_shm is set but this plugin takes its batches in the messages")
	}
	return p.shm.Answer(n)
}

// negotiated is the protocol version go-plugin negotiated (0 for a
// connection made by Connect, which negotiates nothing).
func (p *Plugin) negotiated() int {
	if p.client == nil {
		return 0
	}
	return p.client.NegotiatedVersion()
}

// Version is the protocol version the plugin speaks (1 to 3).
func (p *Plugin) Version() int { return p.version }

// Transport is how batches reach the plugin: "shm" (shared memory) or
// "messages".
func (p *Plugin) Transport() string {
	if p.shm != nil {
		return "shm"
	}
	return TransportMessages
}

// ShmBytes reports the bytes of batch arrays written into shared memory
// and the bytes found unchanged since the last call and not written again
// (both 0 with the messages).
func (p *Plugin) ShmBytes() (written, kept int64) {
	if p.shm == nil {
		return 0, 0
	}
	return p.shm.Written, p.shm.Kept
}

// Arena is a host's shared-memory allocator of a step's per-token columns
// (a core.Allocator with a Reset per step): a trainer that allocates its
// batch in the arena its shared-memory plugins use (Plugin.UseArena) hands
// every column over without a copy.
type Arena = wire.Arena

// NewArena returns an arena with no region yet (see wire.Arena).
func NewArena() *Arena { return wire.NewArena() }

// UseArena makes the plugin read columns allocated in a where they lie. It
// reports false, and does nothing, when batches go in the messages.
func (p *Plugin) UseArena(a *Arena) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shm == nil || a == nil {
		return false
	}
	p.shm.UseArena(a)
	return true
}

// ShmInPlace reports the bytes of columns handed over where they lay in
// the arena (0 without one).
func (p *Plugin) ShmInPlace() int64 {
	if p.shm == nil {
		return 0
	}
	return p.shm.InPlace
}

// releaseShm frees the shared-memory regions (the plugin is gone or
// closing).
func (p *Plugin) releaseShm() {
	p.shm.Close()
	p.shm = nil
}

func (p *Plugin) tokenLoss(info core.StepInfo, r *core.Rollout) (core.TokenLoss, error) {
	b, err := p.batch("TokenLoss", info, r, 2*r.NumTokens())
	if err != nil {
		return core.TokenLoss{}, err
	}
	var resp *pb.TokenLossResponse
	if err := p.call("TokenLoss", func(ctx context.Context) (err error) {
		resp, err = p.rpc.TokenLoss(ctx, b, wire.CallOptions()...)
		return
	}); err != nil {
		return core.TokenLoss{}, err
	}
	pg, kl := resp.PgWeight, resp.AbsKlCoef
	if resp.InShm {
		total := r.NumTokens()
		all, err := p.answer(true, nil, 2*total)
		if err != nil {
			return core.TokenLoss{}, p.invalid("TokenLoss", "%v", err)
		}
		if len(pg) != 0 || len(kl) != 0 {
			return core.TokenLoss{}, p.invalid("TokenLoss", "in_shm is set but the message carries %d pg_weight and %d abs_kl_coef values", len(pg), len(kl))
		}
		pg, kl = nil, nil
		if resp.HasPgWeight {
			pg = all[:total:total]
		}
		if resp.HasAbsKlCoef {
			kl = all[total:]
		}
	}
	out, err := checkTokenLoss(tokenLossWire{hasPG: resp.HasPgWeight, pg: pg, hasKL: resp.HasAbsKlCoef,
		kl: kl, ent: resp.EntropyCoef}, r.SeqLens(), p.weight(info))
	if err != nil {
		return core.TokenLoss{}, p.invalid("TokenLoss", "%v", err)
	}
	return out, nil
}

func (p *Plugin) headMasks(info core.StepInfo, r *core.Rollout) ([][]float64, error) {
	b, err := p.batch("HeadMasks", info, r, r.NumTokens()*r.ValueHeads)
	if err != nil {
		return nil, err
	}
	var resp *pb.HeadMasksResponse
	if err := p.call("HeadMasks", func(ctx context.Context) (err error) {
		resp, err = p.rpc.HeadMasks(ctx, b, wire.CallOptions()...)
		return
	}); err != nil {
		return nil, err
	}
	masks := resp.Masks
	if resp.InShm {
		// The answer's size from the rows the plugin reports, each 0 or
		// T_i (checkHeadMasks names a wrong one).
		n := 0
		for i, rows := range resp.Rows {
			if i < len(r.Seqs) && (rows == 0 || int(rows) == r.Seqs[i].Len()) {
				n += int(rows) * r.ValueHeads
			}
		}
		if masks, err = p.answer(true, resp.Masks, n); err != nil {
			return nil, p.invalid("HeadMasks", "%v", err)
		}
	}
	out, err := checkHeadMasks(resp.Rows, masks, r.SeqLens(), r.ValueHeads)
	if err != nil {
		return nil, p.invalid("HeadMasks", "%v", err)
	}
	return out, nil
}

// observe returns the plugin's metrics under explore/<name>/ (see
// checkObserve), plus explore/<name>/weight when the entry has a weight;
// a plugin without the Observe hook is not called (the host wraps it as
// an Observer only to report the weight).
func (p *Plugin) observe(info core.StepInfo, r *core.Rollout) (map[string]float64, error) {
	var metrics map[string]float64
	if p.caps&wire.CapObserve != 0 {
		b, err := p.batch("Observe", info, r, 0)
		if err != nil {
			return nil, err
		}
		var resp *pb.ObserveResponse
		if err := p.call("Observe", func(ctx context.Context) (err error) {
			resp, err = p.rpc.Observe(ctx, b, wire.CallOptions()...)
			return
		}); err != nil {
			return nil, err
		}
		metrics = resp.Metrics
	}
	out, err := checkObserve(metrics, p.name, p.cfg.Weight != nil, p.weight(info))
	if err != nil {
		return nil, p.invalid("Observe", "%v", err)
	}
	return out, nil
}

// weight is the entry's w_t at the step of info (1 without a weight:).
func (p *Plugin) weight(info core.StepInfo) float64 {
	if p.cfg.Weight == nil {
		return 1
	}
	return p.cfg.Weight.Weight(info.Step, info.TotalSteps)
}

func (p *Plugin) saveState() ([]byte, error) {
	var resp *pb.State
	if err := p.call("SaveState", func(ctx context.Context) (err error) {
		resp, err = p.rpc.SaveState(ctx, &pb.SaveStateRequest{}, wire.CallOptions()...)
		return
	}); err != nil {
		return nil, err
	}
	if resp.Data == nil {
		return []byte{}, nil
	}
	return resp.Data, nil
}

func (p *Plugin) loadState(data []byte) error {
	return p.call("LoadState", func(ctx context.Context) error {
		_, err := p.rpc.LoadState(ctx, &pb.State{Data: data}, wire.CallOptions()...)
		return err
	})
}
