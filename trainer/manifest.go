package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/cde-rl/cde/core"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// ManifestName is the file a checkpoint directory gets last: the size and
// sha256 of every other file in it. Its presence marks the checkpoint
// complete; a file that does not match it is corrupt.
const ManifestName = "MANIFEST.json"

// ErrIncompleteCheckpoint marks a checkpoint directory without a manifest
// (written up to a crash).
var ErrIncompleteCheckpoint = errors.New("incomplete checkpoint (no " + ManifestName + ")")

type manifest struct {
	Step  int                     `json:"step"`
	Files map[string]manifestFile `json:"files"`
}

type manifestFile struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// WriteManifest syncs every file under dir, then writes dir/MANIFEST.json
// with their sizes and sha256 sums (atomically, synced).
func WriteManifest(dir string, step int) error {
	m := manifest{Step: step, Files: map[string]manifestFile{}}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == ManifestName || strings.HasSuffix(rel, ".tmp") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		m.Files[filepath.ToSlash(rel)] = manifestFile{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
		return nil
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := core.WriteFileAtomic(filepath.Join(dir, ManifestName), data); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// VerifyCheckpoint checks every file of dir's manifest: present, of the
// recorded size and sha256. It returns ErrIncompleteCheckpoint (wrapped)
// when there is no manifest, and an error naming the file otherwise.
func VerifyCheckpoint(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if os.IsNotExist(err) {
		return fmt.Errorf("%s: %w", dir, ErrIncompleteCheckpoint)
	}
	if err != nil {
		return err
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil || m.Files == nil {
		return fmt.Errorf("checkpoint %s: %s is corrupt: %v", dir, ManifestName, err)
	}
	names := make([]string, 0, len(m.Files))
	for name := range m.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want := m.Files[name]
		if name == "" || strings.Contains(name, "..") || filepath.IsAbs(name) {
			return fmt.Errorf("checkpoint %s: %s names a file outside the checkpoint: %q", dir, ManifestName, name)
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %s is missing: %w", dir, name, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("checkpoint %s: %s: %w", dir, name, err)
		}
		if n != want.Size || hex.EncodeToString(h.Sum(nil)) != want.SHA256 {
			return fmt.Errorf("checkpoint %s: %s is corrupt (size %d, sha256 %s; the manifest says size %d, sha256 %s): restore the file or remove this checkpoint directory to resume from an older one",
				dir, name, n, hex.EncodeToString(h.Sum(nil))[:12], want.Size, want.SHA256[:min(12, len(want.SHA256))])
		}
	}
	// Every file the loaders may read is covered: an unlisted one is as
	// suspect as a changed one.
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if _, listed := m.Files[filepath.ToSlash(rel)]; !listed && rel != ManifestName {
			return fmt.Errorf("checkpoint %s: %s is not in its %s (remove the file, or the checkpoint)", dir, rel, ManifestName)
		}
		return nil
	})
}

// VerifyIfManifest verifies dir like VerifyCheckpoint when it has a
// manifest, and accepts it as it is otherwise (a base policy made by hand
// or by an older cde).
func VerifyIfManifest(dir string) error {
	err := VerifyCheckpoint(dir)
	if errors.Is(err, ErrIncompleteCheckpoint) {
		return nil
	}
	return err
}

// FixedConfigKeys are the config keys a run keeps from its first step:
// a resumed run whose config.yaml changes one of them is refused, naming
// it. Everything else (train.steps, learning rates, eval.*, ...) may be
// edited in RUN/config.yaml before --resume, and so may a plugin entry's
// sha256, start_timeout, call_timeout and transport.
var FixedConfigKeys = []string{"seed", "task", "model.layers", "model.d_model", "model.heads", "model.ff", "model.max_len", "model.hf", "model.lora", "model.adapter",
	"algorithm", "strategies", "train.value_heads"}

// fixedConfig extracts FixedConfigKeys from cfg's resolved key tree, in a
// JSON-normalised form (so 1 and 1.0 compare equal after a save).
func fixedConfig(cfg *Config) map[string]any {
	out := map[string]any{}
	for _, key := range FixedConfigKeys {
		out[key] = normalizeJSON(treeValue(cfg.Raw, key))
	}
	return out
}

// treeValue is the value at the dotted key path key of the key tree
// tree (nil when it has none).
func treeValue(tree map[string]any, key string) any {
	var v any = tree
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// parsedDefaults is DefaultConfigYAML parsed, once (nil if it does not parse,
// which LoadConfig reports).
var parsedDefaults = sync.OnceValue(func() *koanf.Koanf {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte(DefaultConfigYAML)), yaml.Parser()); err != nil {
		return nil
	}
	return k
})

// defaultValue is key's value in the embedded defaults (nil when it has
// none there), a copy the caller may change.
func defaultValue(key string) any {
	k := parsedDefaults()
	if k == nil {
		return nil
	}
	return k.Get(key)
}

func normalizeJSON(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	json.Unmarshal(data, &out)
	return out
}

// compareFixed returns an error naming the first fixed key whose value in
// now differs from the checkpoint's.
//
// A key the saved manifest lacks (one made before the key was fixed, or
// before it existed) is compared against the key's embedded default: a run
// resumed with its old config.yaml has that default.
func compareFixed(saved, now map[string]any) error {
	for _, key := range FixedConfigKeys {
		a, b := normalizeJSON(saved[key]), normalizeJSON(now[key])
		if _, ok := saved[key]; !ok {
			a = normalizeJSON(defaultValue(key))
		} else {
			a = withDefaults(a, normalizeJSON(defaultValue(key)))
		}
		if key == "strategies" {
			a, b = withoutPluginPins(a), withoutPluginPins(b)
		}
		if path, x, y, differ := firstDiff(key, a, b); differ {
			return fmt.Errorf("config.yaml changes %s from %s to %s; a run's %s are fixed once it starts (restore the value, or start a new run)",
				path, jsonText(x), jsonText(y), strings.Join(FixedConfigKeys, ", "))
		}
	}
	return nil
}

// withDefaults is the saved value v of a fixed key with the sub-keys its
// default def has and v lacks filled in from def (recursively): a manifest
// written before a sub-key existed (model.lora.base_dtype) compares equal
// to a config that keeps the sub-key's default.
func withDefaults(v, def any) any {
	m, ok := v.(map[string]any)
	d, dok := def.(map[string]any)
	if !ok || !dok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		out[k] = withDefaults(x, d[k])
	}
	for k, x := range d {
		if _, ok := m[k]; !ok {
			out[k] = x
		}
	}
	return out
}

// pluginRunKeys are the keys of a plugin entry that do not change what it
// computes, so a resumed run may change them (a rebuilt binary's sha256, a
// longer timeout).
var pluginRunKeys = []string{"sha256", "start_timeout", "call_timeout", "transport"}

func withoutPluginPins(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			out[i] = e
			continue
		}
		c := map[string]any{}
		for k, x := range m {
			c[k] = x
		}
		if _, isPlugin := c["plugin"]; isPlugin {
			for _, k := range pluginRunKeys {
				delete(c, k)
			}
		}
		out[i] = c
	}
	return out
}

func firstDiff(path string, a, b any) (string, any, any, bool) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if p, x, y, d := firstDiff(path+"."+k, am[k], bm[k]); d {
				return p, x, y, true
			}
		}
		return "", nil, nil, false
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			if p, x, y, d := firstDiff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i]); d {
				return p, x, y, true
			}
		}
		return "", nil, nil, false
	}
	if !reflect.DeepEqual(a, b) {
		return path, a, b, true
	}
	return "", nil, nil, false
}

func jsonText(v any) string {
	if v == nil {
		return "(unset)"
	}
	data, _ := json.Marshal(v)
	return string(data)
}
