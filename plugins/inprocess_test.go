package plugins_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/plugins"
	pb "github.com/cde-rl/cde/plugins/proto"

	_ "github.com/cde-rl/cde/algos/all"
	_ "github.com/cde-rl/cde/strategies/all"
)

var inTree = []struct {
	name, algo string
	params     map[string]any
}{
	{"ppl", "grpo", map[string]any{"kappa": 2.0}},
	{"entropy", "grpo", map[string]any{"coef": 0.01}},
	{"simhash", "grpo", map[string]any{"bits": 4}},
	{"multihead", "ppo", map[string]any{"heads": 4}},
	{"forking_tokens", "grpo", map[string]any{"rho": 0.3}},
	{"clip_cov", "grpo", map[string]any{"ratio": 0.1, "cov_lb": 0}},
	{"kl_cov", "rloo", map[string]any{"ratio": 0.1, "kl_coef": 0.5}},
	{"adaptive_entropy", "grpo", map[string]any{"target": 1, "init": 0.01, "max_coef": 0.5}},
}

func algorithm(t testing.TB, name string) core.Algorithm {
	a, err := core.NewAlgorithm(name, core.NewParams("algorithm", nil))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newInTree(t testing.TB, name string, params map[string]any, algo core.Algorithm) core.Strategy {
	s, err := core.NewStrategy(name, core.NewParams("strategies[0]", copyMap(params)), algo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func copyMap(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// transports are the two ways a batch reaches a plugin (Config.Transport)
// and what Plugin.Transport then reports.
var transports = []struct{ config, want string }{
	{plugins.TransportAuto, "shm"},
	{plugins.TransportMessages, "messages"},
}

// newInProcess serves the in-tree strategy over go-plugin's in-process
// gRPC test connection and wraps it as the host does, with the given
// transport (the shared memory works in-process too: the plugin side opens
// the host's memfds through /proc/self's pid).
func newInProcess(t testing.TB, name string, params map[string]any, algo core.Algorithm, transport string) core.Strategy {
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		plugins.PluginName: &plugins.GRPCPlugin{Factory: func(p *core.Params, a core.Algorithm) (core.Strategy, error) {
			return core.NewStrategy(name, p, a)
		}},
	})
	// client.Close asks the server to shut down (go-plugin's Shutdown stops
	// it); stopping it here as well raced with that Stop (go test -race).
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(plugins.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugins.Connect(raw.(pb.StrategyClient), plugins.Config{Path: "in-process:" + name, Params: copyMap(params),
		ParamsPath: "strategies[0]", Algorithm: algo, Transport: transport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.HooksOf(s).Close() })
	wantTransport(t, s, transport)
	return s
}

// wantTransport fails t unless the plugin strategy s uses the transport
// that config asks for (shm on Linux for auto).
func wantTransport(t testing.TB, s core.Strategy, config string) {
	t.Helper()
	p, ok := plugins.Of(s)
	if !ok {
		t.Fatal("plugins.Of: not a plugin")
	}
	want := "messages"
	if config == plugins.TransportAuto && runtime.GOOS == "linux" {
		want = "shm"
	}
	if got := p.Transport(); got != want {
		t.Fatalf("transport %s with %q; want %s", got, config, want)
	}
}

// TestInProcessConformance runs the conformance kit on every in-tree
// strategy served through the gRPC path, with either transport.
func TestInProcessConformance(t *testing.T) {
	for _, tr := range transports {
		for _, c := range inTree {
			t.Run(tr.want+"/"+c.name, func(t *testing.T) {
				algo := algorithm(t, c.algo)
				strategytest.Run(t, func() core.Strategy { return newInProcess(t, c.name, c.params, algo, tr.config) },
					strategytest.Options{Algorithm: c.algo, Steps: 3})
			})
		}
	}
}

// TestInProcessEqualsInTree: the served strategy's outputs equal the
// in-tree call's, bit for bit, step after step (state included).
func TestInProcessEqualsInTree(t *testing.T) {
	for _, tr := range transports {
		for _, c := range inTree {
			t.Run(tr.want+"/"+c.name, func(t *testing.T) { equalsInTree(t, c.name, c.algo, c.params, tr.config) })
		}
	}
}

func equalsInTree(t *testing.T, name, algoName string, params map[string]any, transport string) {
	algo := algorithm(t, algoName)
	local := newInTree(t, name, params, algo)
	remote := newInProcess(t, name, params, algo, transport)
	if local.Name() != remote.Name() || local.Needs() != remote.Needs() {
		t.Fatalf("name/needs: %s %+v vs %s %+v", local.Name(), local.Needs(), remote.Name(), remote.Needs())
	}
	for _, hook := range []string{"RewardHook", "AdvantageHook", "LossHook", "HeadMasker", "Observer", "Stateful", "TokenLossHook"} {
		if implements(local, hook) != implements(remote, hook) {
			t.Errorf("%s: in-tree %v, plugin %v", hook, implements(local, hook), implements(remote, hook))
		}
	}
	o := strategytest.Options{Algorithm: algoName, ValueHeads: 4, Seed: 11}
	rng := newRand(11)
	for step := range 4 {
		r := strategytest.RandomRollout(rng, o)
		r.Step = step
		info := core.StepInfo{Step: step, TotalSteps: 10, Algorithm: algoName, Seed: 11}
		a, err := strategytest.RunStep(local, info, strategytest.Clone(r))
		if err != nil {
			t.Fatal(err)
		}
		b, err := strategytest.RunStep(remote, info, strategytest.Clone(r))
		if err != nil {
			t.Fatal(err)
		}
		// The host logs a plugin's metrics under explore/<name>/.
		a.Metrics = underPrefix(name, a.Metrics)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d: in-tree %+v\nplugin %+v", step, a, b)
		}
		if sl, ok := local.(core.Stateful); ok {
			x, _ := sl.SaveState()
			y, err := core.HooksOf(remote).SaveState()
			if err != nil || string(x) != string(y) {
				t.Fatalf("step %d: state differs (%v)", step, err)
			}
		}
	}
}

// underPrefix renames metrics as the host does for a plugin named name:
// explore/<name>/KEY, unless KEY already starts with explore/<name>/.
func underPrefix(name string, m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "explore/"+name+"/") {
			k = "explore/" + name + "/" + k
		}
		out[k] = v
	}
	return out
}

func implements(s core.Strategy, hook string) bool {
	switch hook {
	case "RewardHook":
		return core.HooksOf(s).RewardBonus != nil
	case "AdvantageHook":
		return core.HooksOf(s).AdvantageBonus != nil
	case "LossHook":
		return core.HooksOf(s).LossTerms != nil
	case "HeadMasker":
		return core.HooksOf(s).HeadMasks != nil
	case "Observer":
		return core.HooksOf(s).Observe != nil
	case "Stateful":
		return core.HooksOf(s).SaveState != nil
	case "TokenLossHook":
		return core.HooksOf(s).TokenLoss != nil
	}
	return false
}

func TestMessageLimitFitsPaperScale(t *testing.T) {
	need := plugins.MessageBytes(2048, 3072, 16, 4096)
	if need >= plugins.MaxMessageSize {
		t.Fatalf("paper-scale batch needs %d bytes, limit %d", need, plugins.MaxMessageSize)
	}
	if plugins.MaxMessageSize >= 1<<31 {
		t.Fatalf("limit %d is not under protobuf's 2 GiB", plugins.MaxMessageSize)
	}
	t.Logf("paper-scale request bound %.2f GB, limit %.2f GB", float64(need)/1e9, float64(plugins.MaxMessageSize)/1e9)
}

// TestGeneratedCodeFresh regenerates plugins/proto and the Python SDK's
// messages into a
// temp dir and compares with the committed files, when protoc and the
// generators are installed.
func TestGeneratedCodeFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (apt-get install protobuf-compiler libprotobuf-dev): cannot check the generated code")
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	bin := filepath.Join(strings.TrimSpace(string(gopath)), "bin")
	for _, g := range []string{"protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := os.Stat(filepath.Join(bin, g)); err != nil {
			if _, err := exec.LookPath(g); err != nil {
				t.Skipf("%s not installed (plugins/gen.sh --install): cannot check the generated code", g)
			}
		}
	}
	out := t.TempDir()
	os.MkdirAll(filepath.Join(out, "proto"), 0o755)
	cmd := exec.Command("bash", "gen.sh")
	cmd.Env = append(os.Environ(), "GEN_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, b)
	}
	for f, fresh := range map[string]string{"proto/cde_strategy.pb.go": "proto/cde_strategy.pb.go",
		"proto/cde_strategy_grpc.pb.go":            "proto/cde_strategy_grpc.pb.go",
		"../python/cde_plugin/cde_strategy_pb2.py": "python/cde_plugin/cde_strategy_pb2.py"} {
		want, err := os.ReadFile(filepath.Join(out, fresh))
		if err != nil {
			t.Fatalf("gen.sh did not write %s: %v", fresh, err)
		}
		got, _ := os.ReadFile(f)
		if stripVersions(string(got)) != stripVersions(string(want)) {
			t.Errorf("%s is stale: run plugins/gen.sh", f)
		}
	}
}

// stripVersions drops the generator-version comment lines (a different
// protoc release alone does not make the code stale).
func stripVersions(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "// \tprotoc ") || strings.HasPrefix(l, "// - protoc ") || strings.HasPrefix(l, "// protoc ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}
