package trainer

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// defaultsTree is DefaultConfigYAML parsed (a fresh copy).
func defaultsTree(t *testing.T) map[string]any {
	t.Helper()
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider([]byte(DefaultConfigYAML)), yaml.Parser()); err != nil {
		t.Fatal(err)
	}
	return k.Raw()
}

// treeLeaves lists the dotted paths of tree's values that are not
// non-empty mappings (scalars, lists, {}), sorted.
func treeLeaves(tree map[string]any, prefix string) []string {
	var out []string
	for k, v := range tree {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			out = append(out, treeLeaves(m, prefix+k+".")...)
			continue
		}
		out = append(out, prefix+k)
	}
	sort.Strings(out)
	return out
}

// editTree sets (or, with remove, deletes) the dotted key of tree.
func editTree(tree map[string]any, key string, v any, remove bool) {
	parts := strings.Split(key, ".")
	m := tree
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	if remove {
		delete(m, parts[len(parts)-1])
		return
	}
	m[parts[len(parts)-1]] = v
}

// treeYAML is tree as YAML, a stand-in for DefaultConfigYAML.
func treeYAML(t *testing.T, tree map[string]any) string {
	t.Helper()
	data, err := yaml.Parser().Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// withoutRaw is c's decoded values (the key tree it was read from and the
// preset's log left out).
func withoutRaw(c *Config) Config {
	out := *c
	out.Raw, out.PresetApplied = nil, nil
	return out
}

// DefaultConfigYAML states every default once: the defaults load, so every
// key the decode functions read has a default there (a read of one it
// lacks is an error naming the key), and without any one of its keys they
// fail naming that key, so no decode function falls back on a default of
// its own. task and algorithm are read whole, by their factories.
func TestEveryDecodedKeyHasADefault(t *testing.T) {
	if _, err := loadConfig(LoadOptions{Env: []string{}}, DefaultConfigYAML); err != nil {
		t.Fatalf("the defaults alone: %v", err)
	}
	keys := treeLeaves(defaultsTree(t), "")
	if len(keys) < 70 {
		t.Fatalf("%d keys in DefaultConfigYAML, want the whole config: %v", len(keys), keys)
	}
	for _, key := range keys {
		if strings.HasPrefix(key, "task.") || strings.HasPrefix(key, "algorithm.") {
			continue
		}
		tree := defaultsTree(t)
		editTree(tree, key, nil, true)
		_, err := loadConfig(LoadOptions{Env: []string{}}, treeYAML(t, tree))
		if want := "config: " + key + ": no value"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DefaultConfigYAML without %s: got %v, want %q (a decode function has a default of its own?)", key, err, want)
		}
	}
}

// defaultAlternatives are, for the keys whose values are not numbers or
// booleans, another valid value to give them in DefaultConfigYAML.
var defaultAlternatives = map[string]any{
	"preset":                        "paper",
	"task.name":                     "countdown",
	"algorithm.name":                "ppo",
	"strategies":                    []any{map[string]any{"name": "entropy"}},
	"model.checkpoint":              "",
	"model.hf":                      "m",
	"model.adapter":                 "a",
	"model.lora.base_dtype":         "bfloat16",
	"model.lora.target_modules":     []any{"q_proj"},
	"backend.engine":                "cpu",
	"backend.pjrt_plugin":           "p.so",
	"rollout.dtype":                 "bfloat16",
	"rollout.servers":               []any{"http://127.0.0.1:1"},
	"rollout.server_model":          "m",
	"rollout.server_timeout":        "30s",
	"rollout.weight_sync.dir":       "d",
	"rollout.weight_sync.endpoint":  "/reload",
	"rollout.weight_sync.token_env": "X_TOKEN",
	"train.kl_estimator":            "k1",
	"train.kl_mode":                 "reward",
	"train.loss_agg_mode":           "seq-mean-token-mean",
	"train.ratio_level":             "sequence",
	"train.policy_loss":             "cispo",
	"train.policy_loss_params":      map[string]any{"tau_pos": 2.0},
	"train.critic_init":             "random",
	"train.logger":                  []any{"jsonl", "tensorboard"},
	"eval.sets":                     []any{"a"},
	"eval.set_k":                    map[string]any{"math": 1},
	"pretrain.dir":                  "d",
}

// defaultContext are --set overrides under which a key's default reaches
// the Config (LoRA settings need model.hf and a rank; servers need
// weight_sync.dir, tis_cap servers).
func defaultContext(key string) []string {
	servers := []string{"rollout.servers=[http://127.0.0.1:1]", "rollout.weight_sync.dir=d"}
	switch {
	case key == "model.lora.rank" || key == "model.adapter":
		return []string{"model.hf=m"}
	case strings.HasPrefix(key, "model.lora."):
		return []string{"model.hf=m", "model.lora.rank=8"}
	case key == "rollout.tis_cap":
		return servers
	case key == "rollout.servers":
		return servers[1:]
	case key == "train.policy_loss_params":
		return []string{"train.policy_loss=sapo"} // ppo, the default, has no keys
	case key == "rollout.dtype":
		return []string{"model.hf=m"}
	}
	return nil
}

// readOnly are the keys whose default is the only valid value where it
// matters, so no other default could reach the Config.
var readOnly = map[string]string{
	"model.lora.dropout": "only 0 is implemented",
}

// Changing a default in DefaultConfigYAML changes what a run gets: for the
// issue's example (train.clip_high 0.9, train.steps 7) and for every key,
// a DefaultConfigYAML with that one key's default changed decodes to a
// different Config. A decode function with a default of its own would
// still read the key, so TestEveryDecodedKeyHasADefault is what catches
// that; this one catches a key whose value is dropped.
func TestDefaultsAreTheOneSource(t *testing.T) {
	edited := strings.NewReplacer("clip_high: 0.2,", "clip_high: 0.9,", "steps: 200,", "steps: 7,").Replace(DefaultConfigYAML)
	if edited == DefaultConfigYAML {
		t.Fatal("the edit did not apply: update it to DefaultConfigYAML's text")
	}
	c, err := loadConfig(LoadOptions{Env: []string{}}, edited)
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.ClipHigh != 0.9 || c.Train.Steps != 7 {
		t.Errorf("DefaultConfigYAML with clip_high 0.9, steps 7: the run gets clip_high %v, steps %d", c.Train.ClipHigh, c.Train.Steps)
	}

	for _, key := range treeLeaves(defaultsTree(t), "") {
		if why, ok := readOnly[key]; ok {
			t.Logf("%s: not changed (%s)", key, why)
			continue
		}
		o := LoadOptions{Env: []string{}, Sets: defaultContext(key)}
		base, err := loadConfig(o, DefaultConfigYAML)
		if err != nil {
			t.Fatalf("%s: the defaults under %v: %v", key, o.Sets, err)
		}
		var v any = treeValue(defaultsTree(t), key)
		var candidates []any
		switch x := v.(type) {
		case bool:
			candidates = []any{!x}
		case int:
			candidates = []any{2 * x, x + 1, 1, 2}
		case float64:
			candidates = []any{2 * x, x + 1, x / 2, 2.0, 0.5}
		default:
			alt, ok := defaultAlternatives[key]
			if !ok {
				t.Errorf("%s = %v (%T): give defaultAlternatives another valid value for it", key, v, v)
				continue
			}
			candidates = []any{alt}
		}
		var tried []string
		changed := false
		for _, cand := range candidates {
			if reflect.DeepEqual(cand, v) {
				continue
			}
			tree := defaultsTree(t)
			editTree(tree, key, cand, false)
			c, err := loadConfig(o, treeYAML(t, tree))
			if err != nil {
				tried = append(tried, fmt.Sprintf("%v: %v", cand, err))
				continue
			}
			if reflect.DeepEqual(withoutRaw(c), withoutRaw(base)) {
				tried = append(tried, fmt.Sprintf("%v: the same Config", cand))
				continue
			}
			changed = true
			break
		}
		if !changed {
			t.Errorf("%s: no other default in DefaultConfigYAML changes the Config a run gets (%s)", key, strings.Join(tried, "; "))
		}
	}
}

// A resumed run's config (LoadOptions.Base) written before a key existed
// gets that key's default from DefaultConfigYAML, and every key it holds
// counts as set (a preset fills none of them).
func TestBaseLackingKeysGetsDefaults(t *testing.T) {
	want, err := LoadConfig(LoadOptions{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	tree := defaultsTree(t)
	for _, key := range []string{"rollout.max_rows", "eval.final_k", "eval.max_rows", "model.lora", "train.logger", "train.policy_loss_params"} {
		editTree(tree, key, nil, true)
	}
	c, err := LoadConfig(LoadOptions{Env: []string{}, Base: []byte(treeYAML(t, tree))})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutRaw(c), withoutRaw(want)) {
		t.Errorf("an old run's config:\n%+v\nwant the defaults:\n%+v", withoutRaw(c), withoutRaw(want))
	}
	editTree(tree, "preset", "paper", false)
	editTree(tree, "train.loss_agg_mode", nil, true)
	c, err = LoadConfig(LoadOptions{Env: []string{}, Base: []byte(treeYAML(t, tree))})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.PresetApplied, []string{"train.loss_agg_mode"}) {
		t.Errorf("paper preset over an old run's config set %v, want only the key the config lacks", c.PresetApplied)
	}
}

// defaultValue parses DefaultConfigYAML once and hands out copies.
func TestDefaultValueIsACopy(t *testing.T) {
	lora, ok := defaultValue("model.lora").(map[string]any)
	if !ok || lora["alpha"] == nil {
		t.Fatalf("model.lora = %v", defaultValue("model.lora"))
	}
	lora["alpha"] = 99
	lora["target_modules"].([]any)[0] = "x"
	if again := defaultValue("model.lora").(map[string]any); again["alpha"] == 99 || again["target_modules"].([]any)[0] == "x" {
		t.Errorf("a change to one defaultValue reached the next: %v", again)
	}
	if defaultValue("train.steps") != 200 || defaultValue("no.such") != nil {
		t.Errorf("train.steps %v, no.such %v", defaultValue("train.steps"), defaultValue("no.such"))
	}
}
