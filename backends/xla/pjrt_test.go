package xla

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// touch creates the file rel under root (and its directories).
func touch(t *testing.T, root, rel string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindPJRTPlugin(t *testing.T) {
	// Every case gets a fresh tree with these directories, and creates the
	// files it lists. Names in the expectations are relative to the tree.
	const (
		conf = "conf"  // a directory given as backend.pjrt_plugin
		env1 = "env1"  // PJRT_PLUGIN_LIBRARY_PATH = env1:env2
		env2 = "env2"  //
		std1 = "std1"  // standard places std1, std2
		std2 = "std2"  //
		none = "nodir" // never created
	)
	for _, tc := range []struct {
		name       string
		files      []string // created (empty) under the tree
		links      map[string]string
		dirs       []string // extra directories created
		device     string
		goos       string
		configured string // relative to the tree, "" = unset
		env        string // ':'-list, entries relative to the tree; "-" = unset
		want       string // the path found, relative to the tree
		wantErr    []string
	}{
		{
			name:       "a configured file wins whatever its name",
			files:      []string{"jax/xla_cuda_plugin.so", "env1/pjrt_c_api_cuda_plugin.so", "std1/pjrt_c_api_cuda_plugin.so"},
			device:     "cuda",
			configured: "jax/xla_cuda_plugin.so",
			env:        "env1",
			want:       "jax/xla_cuda_plugin.so",
		},
		{
			name:       "a configured directory is searched for the device's names",
			files:      []string{"conf/pjrt_c_api_cpu_plugin.so", "env1/pjrt_c_api_cpu_plugin.so"},
			device:     "cpu",
			configured: conf,
			env:        "env1",
			want:       "conf/pjrt_c_api_cpu_plugin.so",
		},
		{
			name:       "a configured directory without the plugin does not fall back",
			files:      []string{"conf/pjrt_c_api_cuda_plugin.so", "env1/pjrt_c_api_cpu_plugin.so", "std1/pjrt_c_api_cpu_plugin.so"},
			device:     "cpu",
			configured: conf,
			env:        "env1",
			wantErr: []string{
				`no PJRT plugin for "cpu" found (cde never downloads one); looked, in order, in backend.pjrt_plugin:`,
				"  conf/pjrt-plugin-cpu.so",
				"  conf/pjrt_plugin_cpu.so",
				"  conf/pjrt_c_api_cpu_plugin.so",
				"set backend.pjrt_plugin to the plugin file (or its directory), or PJRT_PLUGIN_LIBRARY_PATH to its directory",
			},
		},
		{
			name:       "a configured path that does not exist is an error naming the key",
			files:      []string{"env1/pjrt_c_api_cpu_plugin.so", "std1/pjrt_c_api_cpu_plugin.so"},
			device:     "cpu",
			configured: "nodir/pjrt_c_api_cpu_plugin.so",
			env:        "env1",
			wantErr:    []string{`backend.pjrt_plugin "nodir/pjrt_c_api_cpu_plugin.so": no such file or directory (cde looks nowhere else when it is set, and never downloads a plugin)`},
		},
		{
			name:   "PJRT_PLUGIN_LIBRARY_PATH next, its directories in order",
			files:  []string{"env2/pjrt_c_api_cpu_plugin.so", "std1/pjrt_c_api_cpu_plugin.so"},
			device: "cpu",
			env:    "env1::env2",
			want:   "env2/pjrt_c_api_cpu_plugin.so",
		},
		{
			name:   "directories outer, names inner",
			files:  []string{"env1/pjrt_c_api_cpu_plugin.so", "env2/pjrt-plugin-cpu.so"},
			device: "cpu",
			env:    "env1:env2",
			want:   "env1/pjrt_c_api_cpu_plugin.so",
		},
		{
			name:   "names in go-xla's order within a directory",
			files:  []string{"env1/pjrt_c_api_cpu_plugin.so", "env1/pjrt_plugin_cpu.so", "env1/pjrt-plugin-cpu.so"},
			device: "cpu",
			env:    "env1",
			want:   "env1/pjrt-plugin-cpu.so",
		},
		{
			name:   "PJRT_PLUGIN_LIBRARY_PATH replaces the standard places",
			files:  []string{"std1/pjrt_c_api_cpu_plugin.so"},
			device: "cpu",
			env:    "env1:nodir",
			wantErr: []string{
				`no PJRT plugin for "cpu" found (cde never downloads one); looked, in order, in PJRT_PLUGIN_LIBRARY_PATH:`,
				"  env1/pjrt-plugin-cpu.so",
				"  env1/pjrt_plugin_cpu.so",
				"  env1/pjrt_c_api_cpu_plugin.so",
				"  nodir/pjrt-plugin-cpu.so",
				"  nodir/pjrt_plugin_cpu.so",
				"  nodir/pjrt_c_api_cpu_plugin.so",
				"set backend.pjrt_plugin to the plugin file (or its directory), or PJRT_PLUGIN_LIBRARY_PATH to its directory",
			},
		},
		{
			name:   "an empty PJRT_PLUGIN_LIBRARY_PATH counts as unset",
			files:  []string{"std2/pjrt_plugin_tpu.so"},
			device: "tpu",
			env:    "",
			want:   "std2/pjrt_plugin_tpu.so",
		},
		{
			name:   "standard places last",
			files:  []string{"std2/pjrt_c_api_cpu_plugin.so"},
			device: "cpu",
			env:    "-",
			want:   "std2/pjrt_c_api_cpu_plugin.so",
		},
		{
			name:   "nothing anywhere: every place looked at, in order",
			files:  []string{"std1/pjrt_c_api_cuda_plugin.so", "std2/pjrt_c_api_cpu_0.83.1_plugin.so"},
			dirs:   []string{"std1/pjrt_c_api_cpu_plugin.so"}, // a directory, not a plugin
			links:  map[string]string{"std2/pjrt_plugin_cpu.so": "gone.so"},
			device: "cpu",
			env:    "-",
			wantErr: []string{
				`no PJRT plugin for "cpu" found (cde never downloads one); looked, in order, in the standard install locations:`,
				"  std1/pjrt-plugin-cpu.so",
				"  std1/pjrt_plugin_cpu.so",
				"  std1/pjrt_c_api_cpu_plugin.so",
				"  std2/pjrt-plugin-cpu.so",
				"  std2/pjrt_plugin_cpu.so",
				"  std2/pjrt_c_api_cpu_plugin.so",
				"set backend.pjrt_plugin to the plugin file (or its directory), or PJRT_PLUGIN_LIBRARY_PATH to its directory",
			},
		},
		{
			name:   "a link to a plugin counts (go-xla's CPU installer links the versioned file)",
			files:  []string{"std1/pjrt_c_api_cpu_v0.83.1_plugin.so"},
			links:  map[string]string{"std1/pjrt_c_api_cpu_plugin.so": "pjrt_c_api_cpu_v0.83.1_plugin.so"},
			device: "cpu",
			env:    "-",
			want:   "std1/pjrt_c_api_cpu_plugin.so",
		},
		{
			name:   "macOS plugins are .dylib",
			files:  []string{"std1/pjrt_c_api_cpu_plugin.so", "std2/pjrt_c_api_cpu_plugin.dylib"},
			device: "cpu",
			goos:   "darwin",
			env:    "-",
			want:   "std2/pjrt_c_api_cpu_plugin.dylib",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			t.Chdir(root) // relative configured paths resolve against it
			for _, d := range []string{conf, env1, env2, std1, std2} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				touch(t, root, f)
			}
			for l, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
					t.Fatal(err)
				}
			}
			l := pjrtLookup{
				Configured: tc.configured,
				Standard:   []string{filepath.Join(root, std1), filepath.Join(root, std2)},
				GOOS:       "linux",
			}
			if tc.goos != "" {
				l.GOOS = tc.goos
			}
			if tc.env != "-" {
				l.EnvPath = tc.env // relative entries: resolved against the working directory
			}
			got, err := findPJRTPlugin(tc.device, l)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("found %s, want an error", got)
				}
				msg := strings.ReplaceAll(err.Error(), root+string(filepath.Separator), "")
				if want := strings.Join(tc.wantErr, "\n"); msg != want {
					t.Fatalf("error:\n%s\nwant:\n%s", msg, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tc.want); got != want {
				t.Fatalf("found %s, want %s", got, want)
			}
		})
	}
}

func TestStandardPJRTDirs(t *testing.T) {
	etc := t.TempDir()
	// ld.so.conf as Debian lays it out: an include of a conf.d glob, whose
	// files name directories; comments and blank lines skipped; a directory
	// already listed earlier kept at its first place.
	if err := os.MkdirAll(filepath.Join(etc, "ld.so.conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(rel, text string) {
		if err := os.WriteFile(filepath.Join(etc, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "# libraries\ninclude "+filepath.Join(etc, "ld.so.conf.d", "*.conf")+"\n\n/opt/lib\n")
	write("ld.so.conf.d/a.conf", "# libc default configuration\n/usr/local/lib\n")
	write("ld.so.conf.d/b.conf", "  /usr/lib/x86_64-linux-gnu  \n/opt/cuda/lib64\n")
	write("ld.so.conf.d/c.txt", "/not/included\n")
	env := map[string]string{
		"LD_LIBRARY_PATH":   "/opt/cuda/lib64::relative/lib:/usr/lib/extra",
		"DYLD_LIBRARY_PATH": "/dy/lib",
	}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name, goos, home, conf string
		want                   []string
	}{
		{"linux", "linux", "/home/u", filepath.Join(etc, "ld.so.conf"), []string{
			"/home/u/.local/lib/go-xla",
			"/home/u/.local/lib/go-xla/nvidia",
			"/home/u/.local/lib/gomlx/pjrt",
			"/usr/local/lib/go-xla",
			"/usr/local/lib/go-xla/nvidia",
			"/usr/local/lib/gomlx/pjrt",
			"/opt/cuda/lib64",
			"/usr/lib/extra",
			"/usr/local/lib",
			"/usr/lib/x86_64-linux-gnu",
			"/opt/lib",
		}},
		{"linux without a home or an ld.so.conf", "linux", "", filepath.Join(etc, "missing.conf"), []string{
			"/usr/local/lib/go-xla",
			"/usr/local/lib/go-xla/nvidia",
			"/usr/local/lib/gomlx/pjrt",
			"/opt/cuda/lib64",
			"/usr/lib/extra",
		}},
		{"darwin", "darwin", "/Users/u", "", []string{
			"/Users/u/Library/Application Support/go-xla",
			"/Users/u/Library/Application Support/GoMLX/PJRT",
			"/usr/local/lib/go-xla",
			"/usr/local/lib/gomlx/pjrt",
			"/dy/lib",
			"/opt/cuda/lib64",
			"/usr/lib/extra",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := standardPJRTDirs(tc.goos, tc.home, getenv, tc.conf)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("dirs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestCUDADataDirFlags(t *testing.T) {
	dirs := map[string]bool{"/l/go-xla/nvidia": true, "/l/nvidia": true}
	isDir := func(p string) bool { return dirs[p] }
	for _, tc := range []struct {
		name, plugin, flags, want string
		changed                   bool
	}{
		{"go-xla layout, no XLA_FLAGS", "/l/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", "",
			"--xla_gpu_cuda_data_dir=/l/go-xla/nvidia", true},
		{"go-xla layout, other flags kept", "/l/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", "--xla_dump_to=/tmp/d",
			"--xla_dump_to=/tmp/d --xla_gpu_cuda_data_dir=/l/go-xla/nvidia", true},
		{"a data directory already set is left alone", "/l/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", "--xla_gpu_cuda_data_dir=/cuda",
			"--xla_gpu_cuda_data_dir=/cuda", false},
		{"no nvidia/ two levels up (JAX's pip layout)", "/venv/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so", "",
			"", false},
		{"not a CUDA plugin", "/l/go-xla/pjrt_c_api_cpu_plugin.so", "",
			"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := cudaDataDirFlags(tc.plugin, tc.flags, isDir)
			if got != tc.want || changed != tc.changed {
				t.Fatalf("got %q, %v; want %q, %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}

func TestCUDAClientOptions(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    map[string]any
		wantErr string
	}{
		{env: nil, want: map[string]any{}},
		{env: map[string]string{"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, want: map[string]any{"preallocate": false}},
		{env: map[string]string{"XLA_PYTHON_CLIENT_PREALLOCATE": "TRUE", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, want: map[string]any{"preallocate": true, "memory_fraction": float32(0.5)}},
		{env: map[string]string{"XLA_PYTHON_CLIENT_PREALLOCATE": "no"}, wantErr: `XLA_PYTHON_CLIENT_PREALLOCATE="no"`},
		{env: map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": "1.5"}, wantErr: `XLA_PYTHON_CLIENT_MEM_FRACTION="1.5"`},
		{env: map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": "0"}, wantErr: `XLA_PYTHON_CLIENT_MEM_FRACTION="0"`},
	} {
		got, err := cudaClientOptions(func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, %v; want %v", tc.env, got, err, tc.want)
		}
	}
}

func TestCUDAFloat32Env(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want map[string]string
	}{
		{env: nil, want: map[string]string{"NVIDIA_TF32_OVERRIDE": "0", "XLA_FLAGS": "--xla_gpu_enable_triton_gemm=false"}},
		{env: map[string]string{"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/x"},
			want: map[string]string{"NVIDIA_TF32_OVERRIDE": "0", "XLA_FLAGS": "--xla_gpu_cuda_data_dir=/x --xla_gpu_enable_triton_gemm=false"}},
		{env: map[string]string{"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=true"}, want: map[string]string{"NVIDIA_TF32_OVERRIDE": "0"}},
		// The user chose: nothing is changed, also for "" (set, empty).
		{env: map[string]string{"NVIDIA_TF32_OVERRIDE": "1"}, want: nil},
		{env: map[string]string{"NVIDIA_TF32_OVERRIDE": ""}, want: nil},
	} {
		got := cudaFloat32Env(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.env, got, tc.want)
		}
	}
}

// The xla:cuda config asks for float32 products unless the user asked for
// TF32 through NVIDIA_TF32_OVERRIDE.
func TestCUDATF32Option(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, ",tf32=false"},
		{map[string]string{"NVIDIA_TF32_OVERRIDE": "0"}, ",tf32=false"},
		{map[string]string{"NVIDIA_TF32_OVERRIDE": "1"}, ",tf32=true"},
	} {
		if got := cudaTF32Option(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }); got != tc.want {
			t.Errorf("env %v: %q, want %q", tc.env, got, tc.want)
		}
	}
}
