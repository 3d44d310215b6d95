package xla

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Where the xla:* engines find their PJRT plugin. This file is pure (no cgo,
// no GoMLX XLA import) so that its search is unit-tested in every build; the
// tagged engine_xla.go hands the path it returns to GoMLX.
//
// The places and file names follow go-xla v0.1.4 (pkg/pjrt/dynamiclib_*.go,
// the library GoMLX's XLA backend loads plugins with), so a plugin installed
// where GoMLX programs find it is found here too. Two things differ on
// purpose: cde resolves the path itself and gives GoMLX an absolute one, so
// GoMLX's by-name lookup, and with it its automatic download, never runs; and
// the first matching file is taken (go-xla dlopens each candidate and skips
// the ones that fail, which would hide a broken install behind an older one).

// pjrtPluginPathEnv is the variable go-xla reads for the directories to
// search, ':'-separated. Set and non-empty, it replaces the standard places
// (as in go-xla); set to "" it counts as unset (go-xla would search nowhere).
const pjrtPluginPathEnv = "PJRT_PLUGIN_LIBRARY_PATH"

// pjrtLookup is everything the search reads from outside, so a test can set
// it without touching the process.
type pjrtLookup struct {
	// Configured is backend.pjrt_plugin: a plugin file (any name) or a
	// directory to search. "" = not set.
	Configured string
	// EnvPath is PJRT_PLUGIN_LIBRARY_PATH.
	EnvPath string
	// Standard are the standard install directories, in search order
	// (standardPJRTDirs).
	Standard []string
	// GOOS picks the library suffix (.dylib on darwin, .so elsewhere).
	GOOS string
}

// pjrtPluginNames are the file names go-xla recognises as device's plugin, in
// the order it globs them in each directory: pjrt-plugin-<device>,
// pjrt_plugin_<device>, pjrt_c_api_<device>_plugin (go-xla's installers write
// the last: pjrt_c_api_cpu_plugin.so, nvidia/pjrt_c_api_cuda_plugin.so,
// pjrt_c_api_tpu_plugin.so). JAX's pip plugins use other names
// (xla_cuda_plugin.so, libtpu.so): give those by path in backend.pjrt_plugin.
func pjrtPluginNames(device, goos string) []string {
	ext := ".so"
	if goos == "darwin" {
		ext = ".dylib"
	}
	return []string{
		"pjrt-plugin-" + device + ext,
		"pjrt_plugin_" + device + ext,
		"pjrt_c_api_" + device + "_plugin" + ext,
	}
}

// standardPJRTDirs lists go-xla's standard plugin directories in its order.
// On Linux: ~/.local/lib/go-xla, ~/.local/lib/go-xla/nvidia,
// ~/.local/lib/gomlx/pjrt, /usr/local/lib/go-xla, /usr/local/lib/go-xla/nvidia,
// /usr/local/lib/gomlx/pjrt, then every absolute LD_LIBRARY_PATH entry, then
// the directories of ldSoConf (/etc/ld.so.conf, following its include lines).
// On macOS: ~/Library/Application Support/go-xla, ~/Library/Application
// Support/GoMLX/PJRT, /usr/local/lib/go-xla, /usr/local/lib/gomlx/pjrt, then
// the absolute DYLD_LIBRARY_PATH and LD_LIBRARY_PATH entries. home "" (no
// home directory) drops the per-user places, as go-xla does. A directory
// listed twice is kept once, at its first place.
func standardPJRTDirs(goos, home string, getenv func(string) string, ldSoConf string) []string {
	var dirs []string
	if goos == "darwin" {
		if home != "" {
			dirs = append(dirs, filepath.Join(home, "Library", "Application Support", "go-xla"),
				filepath.Join(home, "Library", "Application Support", "GoMLX", "PJRT"))
		}
		dirs = append(dirs, "/usr/local/lib/go-xla", "/usr/local/lib/gomlx/pjrt")
		dirs = append(dirs, absEntries(getenv("DYLD_LIBRARY_PATH"))...)
		dirs = append(dirs, absEntries(getenv("LD_LIBRARY_PATH"))...)
		return dedup(dirs)
	}
	if home != "" {
		goXLA := filepath.Join(home, ".local", "lib", "go-xla")
		dirs = append(dirs, goXLA, filepath.Join(goXLA, "nvidia"), filepath.Join(home, ".local", "lib", "gomlx", "pjrt"))
	}
	dirs = append(dirs, "/usr/local/lib/go-xla", "/usr/local/lib/go-xla/nvidia", "/usr/local/lib/gomlx/pjrt")
	dirs = append(dirs, absEntries(getenv("LD_LIBRARY_PATH"))...)
	if ldSoConf != "" {
		dirs = ldConfDirs(dirs, ldSoConf, 0)
	}
	return dedup(dirs)
}

// absEntries are the absolute entries of a ':'-separated list (go-xla skips
// empty and relative ones).
func absEntries(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ":") {
		if p != "" && filepath.IsAbs(p) {
			out = append(out, p)
		}
	}
	return out
}

var (
	ldConfInclude = regexp.MustCompile(`^\s*include\s+(.*?)\s*$`)
	ldConfComment = regexp.MustCompile(`^\s*#`)
)

// ldConfDirs appends the directories named in an ld.so.conf file, expanding
// its "include GLOB" lines in place (a relative GLOB against the including
// file's directory, as ldconfig reads it; go-xla would use the working
// directory, which Debian's absolute include never meets). An unreadable
// file adds nothing (as in go-xla); depth stops include cycles.
func ldConfDirs(dirs []string, file string, depth int) []string {
	if depth > 8 {
		return dirs
	}
	f, err := os.Open(file)
	if err != nil {
		return dirs
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case ldConfComment.MatchString(line), strings.TrimSpace(line) == "":
		case ldConfInclude.MatchString(line):
			pattern := ldConfInclude.FindStringSubmatch(line)[1]
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(filepath.Dir(file), pattern)
			}
			matches, _ := filepath.Glob(pattern)
			for _, m := range matches {
				dirs = ldConfDirs(dirs, m, depth+1)
			}
		default:
			dirs = append(dirs, strings.TrimSpace(line))
		}
	}
	return dirs
}

func dedup(dirs []string) []string {
	seen := map[string]bool{}
	out := dirs[:0:0]
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// findPJRTPlugin returns the absolute path of device's PJRT plugin:
//
//  1. backend.pjrt_plugin when set: a file is taken as the plugin whatever
//     its name; a directory is searched for pjrtPluginNames. If it does not
//     exist, or the directory has no plugin, that is the error (naming the
//     key): a configured path never falls back to the other places.
//  2. else each directory of PJRT_PLUGIN_LIBRARY_PATH, in order;
//  3. else the standard directories.
//
// Within a directory the names are tried in pjrtPluginNames order. When
// nothing is found the error lists every path looked at, in order.
func findPJRTPlugin(device string, l pjrtLookup) (string, error) {
	names := pjrtPluginNames(device, l.GOOS)
	if l.Configured != "" {
		p, err := filepath.Abs(l.Configured)
		if err != nil {
			return "", fmt.Errorf("backend.pjrt_plugin %q: %w", l.Configured, err)
		}
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("backend.pjrt_plugin %q: no such file or directory (cde looks nowhere else when it is set, and never downloads a plugin)", l.Configured)
		}
		if err != nil {
			return "", fmt.Errorf("backend.pjrt_plugin %q: %w", l.Configured, err)
		}
		if !st.IsDir() {
			return p, nil
		}
		if f, ok := firstPlugin([]string{p}, names); ok {
			return f, nil
		}
		return "", notFound(device, "backend.pjrt_plugin", []string{p}, names)
	}
	dirs, from := l.Standard, "the standard install locations"
	if env := envDirs(l.EnvPath); len(env) > 0 {
		dirs, from = env, pjrtPluginPathEnv
	}
	if f, ok := firstPlugin(dirs, names); ok {
		return f, nil
	}
	return "", notFound(device, from, dirs, names)
}

// envDirs splits PJRT_PLUGIN_LIBRARY_PATH, dropping empty entries (go-xla
// does the same) and making relative ones absolute against the working
// directory (GoMLX would take a relative path for a plugin name).
func envDirs(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ":") {
		if p == "" {
			continue
		}
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		out = append(out, p)
	}
	return out
}

// firstPlugin returns the first dir/name (dirs outer, names inner) that is a
// file or a link to one; a broken link or a directory does not count.
func firstPlugin(dirs, names []string) (string, bool) {
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, true
			}
		}
	}
	return "", false
}

func notFound(device, from string, dirs, names []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "no PJRT plugin for %q found (cde never downloads one); looked, in order, in %s:", device, from)
	for _, d := range dirs {
		for _, n := range names {
			b.WriteString("\n  " + filepath.Join(d, n))
		}
	}
	if len(dirs) == 0 {
		b.WriteString("\n  (no directories)")
	}
	b.WriteString("\nset backend.pjrt_plugin to the plugin file (or its directory), or " + pjrtPluginPathEnv + " to its directory")
	return errors.New(b.String())
}

// cudaDataDirFlags returns XLA_FLAGS with --xla_gpu_cuda_data_dir set to the
// nvidia/ directory next to a CUDA plugin's directory (go-xla's install
// layout: lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so beside the CUDA
// libraries in lib/go-xla/nvidia/...), or ok false when nothing is to change:
// the plugin is not a CUDA one, XLA_FLAGS already names a data directory, or
// there is no such nvidia/ directory.
//
// Why: go-xla v0.1.4, on loading a CUDA plugin with that directory present,
// sets the flag to a directory hard-coded from its author's machine
// (pkg/pjrt/cuda_linux.go, cudaPluginCheckDrivers) unless XLA_FLAGS already
// has one. Setting it first, to the directory go-xla means to use, keeps
// that path out.
func cudaDataDirFlags(pluginPath, xlaFlags string, isDir func(string) bool) (string, bool) {
	up := strings.ToUpper(pluginPath)
	if !strings.Contains(up, "CUDA") && !strings.Contains(up, "NVIDIA") {
		return xlaFlags, false
	}
	if strings.Contains(xlaFlags, "--xla_gpu_cuda_data_dir") {
		return xlaFlags, false
	}
	nvidia := filepath.Join(filepath.Dir(filepath.Dir(pluginPath)), "nvidia")
	if !isDir(nvidia) {
		return xlaFlags, false
	}
	flag := "--xla_gpu_cuda_data_dir=" + nvidia
	if xlaFlags == "" {
		return flag, true
	}
	return xlaFlags + " " + flag, true
}

// cudaClientOptions are the CUDA PJRT client's creation options that cde
// sets, read from JAX's documented variables so a user who knows JAX's
// switches has them here too: XLA_PYTHON_CLIENT_PREALLOCATE (true/false;
// the plugin's own default, true, takes XLA_PYTHON_CLIENT_MEM_FRACTION of
// the GPU's memory, 0.75 unless set, when the client starts) and
// XLA_PYTHON_CLIENT_MEM_FRACTION (in (0, 1]). Unset variables leave the
// plugin's defaults; a value that is neither is an error naming the
// variable. The plugin reads the options "preallocate" and
// "memory_fraction" (xla/pjrt/c/pjrt_c_api_gpu_internal.cc).
func cudaClientOptions(getenv func(string) string) (map[string]any, error) {
	opts := map[string]any{}
	if v := getenv("XLA_PYTHON_CLIENT_PREALLOCATE"); v != "" {
		switch strings.ToLower(v) {
		case "true", "1":
			opts["preallocate"] = true
		case "false", "0":
			opts["preallocate"] = false
		default:
			return nil, fmt.Errorf("XLA_PYTHON_CLIENT_PREALLOCATE=%q: want true or false", v)
		}
	}
	if v := getenv("XLA_PYTHON_CLIENT_MEM_FRACTION"); v != "" {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("XLA_PYTHON_CLIENT_MEM_FRACTION=%q: want a fraction in (0, 1]", v)
		}
		opts["memory_fraction"] = float32(f)
	}
	return opts, nil
}

// cudaFloat32Env is what cde sets in its own environment before the CUDA
// plugin loads, so that xla:cuda computes float32 matrix products in
// float32, as the cpu engine and PyTorch do. GoMLX v0.26 leaves every
// float32 dot at XLA's DEFAULT precision, which XLA runs in TF32 on Ampere
// and newer GPUs (10-bit mantissas: on an H100, log-probs of tiny models
// moved by 3e-3 to 1e-2 against PyTorch's float32, and the conformance
// suite failed by 10x to 5000x its float32 tolerance). NVIDIA_TF32_OVERRIDE=0
// makes cuBLAS use full float32, and --xla_gpu_enable_triton_gemm=false
// sends XLA's products to cuBLAS instead of its Triton kernels, which do
// not read that variable; together they brought both within float32
// tolerance there (docs/scale.md).
//
// A user who sets NVIDIA_TF32_OVERRIDE (to 1 for TF32's speed) gets no
// changes at all; an XLA_FLAGS that already names
// xla_gpu_enable_triton_gemm keeps its choice. lookupEnv is os.LookupEnv.
//
// GoMLX v0.28's XLA backend (go-xla v0.4.1) asks for TF32 products itself
// on CUDA unless its config says tf32=false: cudaTF32Option gives that
// option to match (unverified on a GPU with v0.28 until scripts/gpucheck
// runs there).
func cudaFloat32Env(lookupEnv func(string) (string, bool)) map[string]string {
	if _, set := lookupEnv("NVIDIA_TF32_OVERRIDE"); set {
		return nil
	}
	out := map[string]string{"NVIDIA_TF32_OVERRIDE": "0"}
	if flags, _ := lookupEnv("XLA_FLAGS"); !strings.Contains(flags, "xla_gpu_enable_triton_gemm") {
		out["XLA_FLAGS"] = strings.TrimSpace(flags + " --xla_gpu_enable_triton_gemm=false")
	}
	return out
}

// cudaTF32Option is the tf32 option of the xla:cuda backend's config
// string: ",tf32=false" (float32 products in float32) unless the user set
// NVIDIA_TF32_OVERRIDE to something other than 0, asking for TF32's speed.
func cudaTF32Option(lookupEnv func(string) (string, bool)) string {
	if v, set := lookupEnv("NVIDIA_TF32_OVERRIDE"); set && strings.TrimSpace(v) != "0" {
		return ",tf32=true"
	}
	return ",tf32=false"
}
