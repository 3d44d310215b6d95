//go:build linux

package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/core/strategytest"
	"github.com/cde-rl/cde/internal/testwait"
	"github.com/cde-rl/cde/plugins"
	pb "github.com/cde-rl/cde/plugins/proto"
)

// memfdHolders lists the processes that hold (as a descriptor or a
// mapping) a shared-memory region of the host with the given pid: its
// memfds are named cde-plugin-<pid>-input and cde-plugin-<pid>-answer.
func memfdHolders(t *testing.T, hostPid int) []string {
	t.Helper()
	mark := fmt.Sprintf("memfd:cde-plugin-%d-", hostPid)
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, dir := range procs {
		if maps, err := os.ReadFile(dir + "/maps"); err == nil && strings.Contains(string(maps), mark) {
			out = append(out, dir+"/maps")
		}
		fds, _ := filepath.Glob(dir + "/fd/*")
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && strings.Contains(target, mark) {
				out = append(out, fd)
			}
		}
	}
	return out
}

// TestKillHostLeavesNoSharedMemory: a host that used the shared-memory
// transport (input and answer regions, mapped by the plugin) and is killed
// with kill -9 leaves no region behind: the memfds have no name, and the
// plugin, their last holder, dies with the host.
func TestKillHostLeavesNoSharedMemory(t *testing.T) {
	t.Run("go", func(t *testing.T) { killHostLeavesNoSharedMemory(t, testPlugin, `{"strategy": "forking_tokens"}`) })
	t.Run("python", func(t *testing.T) {
		killHostLeavesNoSharedMemory(t, pythonScript(t, pyTestPlugin), `{"mode": "ok"}`)
	})
}

func killHostLeavesNoSharedMemory(t *testing.T, path, params string) {
	cmd, pid := startHost(t, path, hostHelperCallEnv+"=1", hostHelperParamsEnv+"="+params)
	killLater(t, pid)
	held := memfdHolders(t, cmd.Process.Pid)
	var byPlugin, answer bool
	for _, h := range held {
		byPlugin = byPlugin || strings.HasPrefix(h, fmt.Sprintf("/proc/%d/", pid))
	}
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	answer = strings.Contains(string(maps), fmt.Sprintf("cde-plugin-%d-answer", cmd.Process.Pid))
	if !byPlugin || !answer {
		t.Fatalf("before the kill: the plugin maps the regions %v, the answer region %v (holders %v); the test would prove nothing", byPlugin, answer, held)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitGone(t, pid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := memfdHolders(t, cmd.Process.Pid)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after kill -9 of the host, its regions are still held: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKillHostKillsPluginChildren: the children a plugin started die with
// the host's kill -9 too, not only the plugin (which the kernel kills,
// Pdeathsig): a Python plugin that forked a child holding the host's two
// shared-memory regions, and a Go plugin behind a wrapper script whose
// sleep child it left running. Before, the child outlived the host and
// kept its regions mapped.
func TestKillHostKillsPluginChildren(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plugin func(t *testing.T, dir string) string
		params string
		memfd  bool // the child holds the host's regions
	}{
		{"python fork", func(t *testing.T, dir string) string { return pythonScript(t, pyTestPlugin) }, `{"mode": "fork"}`, true},
		{"go behind a wrapper", func(t *testing.T, dir string) string {
			return writeScript(t, dir, "wrapper", fmt.Sprintf("sleep 1000 &\necho $! > %s\nexec %s\n", filepath.Join(dir, "child.pid"), testPlugin))
		}, `{"strategy": "forking_tokens"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "child.pid")
			cmd, pid := startHost(t, tc.plugin(t, dir), hostHelperCallEnv+"=1", hostHelperParamsEnv+"="+tc.params, "CDE_PYTEST_FORK_PID="+pidFile)
			killLater(t, pid)
			child := readPid(t, pidFile)
			killLater(t, child)
			if !alive(child) {
				t.Fatalf("the plugin's child %d is not running; the test would prove nothing", child)
			}
			if tc.memfd && !slices.ContainsFunc(memfdHolders(t, cmd.Process.Pid), func(h string) bool {
				return strings.HasPrefix(h, fmt.Sprintf("/proc/%d/", child))
			}) {
				t.Fatalf("the plugin's child %d does not hold the host's regions (holders %v); the test would prove nothing", child, memfdHolders(t, cmd.Process.Pid))
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			waitGone(t, pid)
			waitGone(t, child)
			deadline := time.Now().Add(testwait.Scale(5 * time.Second))
			for left := memfdHolders(t, cmd.Process.Pid); len(left) > 0; left = memfdHolders(t, cmd.Process.Pid) {
				if time.Now().After(deadline) {
					t.Fatalf("after kill -9 of the host, its regions are still held: %v", left)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestShmOnePerStep: a plugin with two hooks (multihead: AdvantageBonus
// and HeadMasks) called on the same step's batch gets the arrays once:
// the second hook writes nothing, and when the trainer changes the
// advantages only they are written again. Answers equal the in-tree
// strategy's throughout.
func TestShmOnePerStep(t *testing.T) {
	algo := algorithm(t, "ppo")
	params := map[string]any{"heads": 4}
	s, p := mustOpen(t, map[string]any{"strategy": "multihead", "params": params}, func(c *plugins.Config) { c.Algorithm = algo })
	if p.Transport() != "shm" {
		t.Fatalf("transport %s", p.Transport())
	}
	local := newInTree(t, "multihead", params, algo)
	r := strategytest.RandomRollout(newRand(4), strategytest.Options{Algorithm: "ppo", ValueHeads: 4, Seed: 4})
	info := core.StepInfo{Step: 1, TotalSteps: 10, Algorithm: "ppo", Seed: 4}
	same := func(what string, a, b any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: in-tree %v, plugin %v", what, a, b)
		}
	}
	want, _ := core.HooksOf(local).AdvantageBonus(info, r)
	got, err := core.HooksOf(s).AdvantageBonus(info, r)
	same("AdvantageBonus", want, got, err)
	w1, k1 := p.ShmBytes()
	wantM, _ := core.HooksOf(local).HeadMasks(info, r)
	gotM, err := core.HooksOf(s).HeadMasks(info, r)
	same("HeadMasks", wantM, gotM, err)
	w2, k2 := p.ShmBytes()
	if w1 == 0 || w2 != w1 || k2-k1 != w1+k1 {
		t.Fatalf("bytes written %d then %d, kept %d then %d; want the second hook to write nothing and keep all %d", w1, w2, k1, k2, w1+k1)
	}
	for i := range r.Seqs {
		for j := range r.Seqs[i].Advantages {
			r.Seqs[i].Advantages[j]++
		}
	}
	want, _ = core.HooksOf(local).AdvantageBonus(info, r)
	got, err = core.HooksOf(s).AdvantageBonus(info, r)
	same("AdvantageBonus after the advantages changed", want, got, err)
	if w3, _ := p.ShmBytes(); w3-w2 != int64(8*r.NumTokens()) {
		t.Fatalf("after the advantages changed: %d bytes written, want %d (the advantages alone)", w3-w2, 8*r.NumTokens())
	}
}

// fakeStrategy is a plugin-side server that answers what a test tells it:
// a plugin that lies about the transport.
type fakeStrategy struct {
	pb.UnimplementedStrategyServer
	desc *pb.Description
	adv  func(b *pb.Batch) *pb.AdvantageBonusResponse
}

func (f *fakeStrategy) Configure(context.Context, *pb.ConfigureRequest) (*pb.Description, error) {
	return f.desc, nil
}

func (f *fakeStrategy) AdvantageBonus(_ context.Context, b *pb.Batch) (*pb.AdvantageBonusResponse, error) {
	return f.adv(b), nil
}

type fakePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *fakeStrategy
}

func (f *fakePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterStrategyServer(s, f.srv)
	return nil
}

func (f *fakePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewStrategyClient(c), nil
}

func connectFake(t *testing.T, srv *fakeStrategy, transport string) (core.Strategy, error) {
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{plugins.PluginName: &fakePlugin{srv: srv}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(plugins.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugins.Connect(raw.(pb.StrategyClient), plugins.Config{Path: "fake", Transport: transport})
	if err == nil {
		t.Cleanup(func() { core.HooksOf(s).Close() })
	}
	return s, err
}

// The host checks what a plugin says of the transport: it may not accept
// shared memory that was not offered, or at a version that has none; an
// answer said to be in shared memory must leave the message's array empty,
// and is checked like any answer.
func TestShmHostChecksPlugin(t *testing.T) {
	desc := func(v uint32, shm bool) *pb.Description {
		return &pb.Description{ProtocolVersion: v, Name: "fake", Shm: shm, Capabilities: &pb.Capabilities{AdvantageBonus: true}}
	}
	if _, err := connectFake(t, &fakeStrategy{desc: desc(3, true)}, plugins.TransportMessages); err == nil ||
		!strings.Contains(err.Error(), "accepts a shared-memory transport the host did not offer") {
		t.Fatalf("accepting shm that was not offered: %v", err)
	}
	if _, err := connectFake(t, &fakeStrategy{desc: desc(2, true)}, plugins.TransportAuto); err == nil ||
		!strings.Contains(err.Error(), "which protocol version 2 does not carry") {
		t.Fatalf("shm at version 2: %v", err)
	}
	info, r := randomRollout(8)
	lengths := make([]int32, len(r.Seqs))
	for i := range r.Seqs {
		lengths[i] = int32(r.Seqs[i].Len())
	}
	cases := []struct {
		name, transport string
		answer          func(b *pb.Batch) *pb.AdvantageBonusResponse
		want            string
	}{
		{"in shm and in the message", plugins.TransportAuto, func(b *pb.Batch) *pb.AdvantageBonusResponse {
			return &pb.AdvantageBonusResponse{Lengths: lengths, Bonus: make([]float64, r.NumTokens()), InShm: true}
		}, "in_shm is set but the message carries"},
		{"in shm without the transport", plugins.TransportMessages, func(b *pb.Batch) *pb.AdvantageBonusResponse {
			return &pb.AdvantageBonusResponse{Lengths: lengths, InShm: true}
		}, "in_shm is set but this plugin takes its batches in the messages"},
		{"lengths that lie", plugins.TransportAuto, func(b *pb.Batch) *pb.AdvantageBonusResponse {
			l := append([]int32{}, lengths...)
			l[0] += 1000
			return &pb.AdvantageBonusResponse{Lengths: l, InShm: true}
		}, "AdvantageBonus returned invalid output"},
		{"a batch not in shared memory", plugins.TransportAuto, func(b *pb.Batch) *pb.AdvantageBonusResponse {
			if b.Shm == nil || b.Shm.Answer == nil || len(b.Logprobs) != 0 {
				return &pb.AdvantageBonusResponse{Lengths: []int32{-1}}
			}
			return &pb.AdvantageBonusResponse{Lengths: lengths, InShm: true}
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := connectFake(t, &fakeStrategy{desc: desc(3, tc.transport == plugins.TransportAuto), adv: tc.answer}, tc.transport)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := core.HooksOf(s).AdvantageBonus(info, r)
			if tc.want == "" {
				// The answer region holds zeros until the plugin writes.
				if err != nil || len(rows) != len(r.Seqs) || len(rows[0]) != r.Seqs[0].Len() {
					t.Fatalf("rows %v, err %v", rows, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
