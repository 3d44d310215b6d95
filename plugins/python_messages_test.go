package plugins_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/plugins"
)

var pyThreadPlugin = filepath.Join("testdata", "python", "threadplugin.py")

// withShebang writes the Python plugin at src into a temporary directory
// as name, executable, with line as its #! line.
func withShebang(t *testing.T, src, name, line string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.HasPrefix(text, "#!") {
		text = text[strings.IndexByte(text, '\n')+1:]
	}
	dst := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(dst, []byte("#!"+line+"\n"+text), 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A Python plugin's __init__ and every hook run on one thread, the main
// one: thread-local state set in __init__ holds in the hooks, and
// signal.signal works in __init__ (off the main thread it raises
// ValueError), its handler running for a signal sent by the plugin itself
// in a hook and for one sent from outside between calls.
func TestPythonHooksOnOneThread(t *testing.T) {
	path := pythonScript(t, pyThreadPlugin)
	for _, tr := range transports {
		t.Run(tr.want, func(t *testing.T) {
			s, err := openPython(t, path, nil, func(c *plugins.Config) { c.Transport = tr.config })
			if err != nil {
				t.Fatal(err)
			}
			p, _ := plugins.Of(s)
			info, r := randomRollout(3)
			hooks := 0
			for step := range 3 {
				info.Step = step
				if _, err := core.HooksOf(s).RewardBonus(info, r); err != nil {
					t.Fatal(err)
				}
				if _, err := core.HooksOf(s).AdvantageBonus(info, r); err != nil {
					t.Fatal(err)
				}
				if _, err := core.HooksOf(s).LossTerms(info); err != nil {
					t.Fatal(err)
				}
				data, err := core.HooksOf(s).SaveState()
				if err != nil {
					t.Fatal(err)
				}
				if err := core.HooksOf(s).LoadState(data); err != nil {
					t.Fatal(err)
				}
				hooks += 5
			}
			// A signal from outside while the plugin waits for a call.
			if err := syscall.Kill(p.Pid(), syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			obs, err := core.HooksOf(s).Observe(info, r)
			if err != nil {
				t.Fatal(err)
			}
			if obs["explore/pythread/threads"] != 1 || obs["explore/pythread/on_main"] != 1 || obs["explore/pythread/local"] != 1 {
				t.Fatalf("observe %v: want __init__ and every hook on one thread, the main one, with __init__'s thread-local state", obs)
			}
			// One SIGUSR1 per hook before Observe, and the one sent from here.
			if got := obs["explore/pythread/signals"]; got < float64(hooks+1) {
				t.Fatalf("observe %v: %v signals handled, want at least %d", obs, got, hooks+1)
			}
		})
	}
}

// Every log line about a plugin tags it one way, "plugin": the
// executable's file name: the plugin's own lines, what it prints, go-plugin's
// lines and the host's ("plugin started" adds the strategy's name).
func TestPluginLogTag(t *testing.T) {
	path := pythonScript(t, pyThreadPlugin)
	logs := &syncWriter{w: &bytes.Buffer{}}
	s, err := openPython(t, path, nil, func(c *plugins.Config) { c.Log = zerolog.New(logs) })
	if err != nil {
		t.Fatal(err)
	}
	info, r := randomRollout(2)
	if _, err := core.HooksOf(s).RewardBonus(info, r); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(logs.String(), "pythread: reward_bonus ran") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	core.HooksOf(s).Close()
	tags := map[string]int{}
	started := false
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		tag, _ := m["plugin"].(string)
		tags[tag]++
		if m["message"] == "plugin started" {
			started = m["strategy"] == "pythread" && m["path"] == path
		}
	}
	if len(tags) != 1 || tags["threadplugin.py"] == 0 || !started {
		t.Fatalf("plugin tags %v (want only threadplugin.py), plugin started with its strategy and path: %v\n%s", tags, started, logs)
	}
	if !strings.Contains(logs.String(), "pythread: reward_bonus ran") {
		t.Fatalf("the hook's print is not in the log:\n%s", logs)
	}
}

// A Python plugin that cannot start says why and what to do: the
// interpreter its #! line names (as the line has it) and the fix, without
// go-plugin's "Unrecognized remote plugin message" or a "failed to exit
// gracefully" warning for a process the host killed itself.
func TestPythonStartMessages(t *testing.T) {
	t.Run("no script", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "gone.py")
		_, err := openPython(t, path, nil, nil)
		wantErr(t, err, "plugin "+path+": script not found (fix the path)")
	})
	t.Run("no #! line", func(t *testing.T) {
		path := withShebang(t, pyThreadPlugin, "noline.py", "")
		text, _ := os.ReadFile(path)
		os.WriteFile(path, text[3:], 0o755) // "#!\n" dropped
		_, err := openPython(t, path, nil, nil)
		wantErr(t, err, "plugin "+path+": failed to start: not a program this system runs (a script needs a #! line naming its interpreter)")
	})
	t.Run("no interpreter", func(t *testing.T) {
		path := withShebang(t, pyThreadPlugin, "noint.py", "/nonexistent/bin/python3")
		_, err := openPython(t, path, nil, nil)
		wantErr(t, err, "plugin "+path+`: its #! line names the interpreter "/nonexistent/bin/python3", which does not exist: `+
			"name in the #! line a Python 3 that has grpcio, protobuf and numpy")
	})
	t.Run("env finds none", func(t *testing.T) {
		path := withShebang(t, pyThreadPlugin, "noenv.py", "/usr/bin/env python3-cde-absent")
		_, err := openPython(t, path, nil, nil)
		wantErr(t, err, "plugin "+path+`: its #! line "#!/usr/bin/env python3-cde-absent" runs "python3-cde-absent" through env, `+
			`and there is no "python3-cde-absent" on PATH: name in the #! line a Python 3 that has grpcio, protobuf and numpy`)
	})
	py := PythonInterpreter()
	pythonScript(t, pyThreadPlugin) // skips without a Python (or fails in CI), sets PYTHONPATH to the SDK
	// python -S leaves out site-packages, so numpy and grpc are missing
	// whatever the interpreter has installed.
	for _, c := range []struct {
		name, pythonpath string
		want             []string
	}{
		{"no numpy", "", []string{"exited before the handshake (exit status 1): its interpreter, " + py + " -S from the #! line, cannot import numpy " +
			"(the plugin SDK needs grpcio, protobuf and numpy): install grpcio, protobuf and numpy for it: ",
			"plugin stderr: ", "ModuleNotFoundError: No module named 'numpy'"}},
		{"no sdk", "none", []string{"exited before the handshake (exit status 1): its interpreter, " + py + " -S from the #! line, cannot import cde_plugin " +
			"(the plugin SDK): put cde's python/ directory on PYTHONPATH"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.pythonpath == "none" {
				t.Setenv("PYTHONPATH", "")
			}
			path := withShebang(t, pyThreadPlugin, "mod.py", py+" -S")
			logs := &syncWriter{w: &bytes.Buffer{}}
			_, err := openPython(t, path, nil, func(cfg *plugins.Config) { cfg.Log = zerolog.New(logs) })
			wantErr(t, err, append([]string{"plugin " + path + ": "}, c.want...)...)
			for _, bad := range []string{"Unrecognized remote plugin message", "failed to start"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("error %q contains %q", err, bad)
				}
			}
			if strings.Contains(logs.String(), "failed to exit gracefully") {
				t.Errorf("log warns that a plugin that exited by itself failed to exit gracefully:\n%s", logs)
			}
		})
	}
}
