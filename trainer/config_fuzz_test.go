package trainer

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzLoadConfigOverrides feeds arbitrary `--set key=value` and `CDE_*`
// overrides to LoadConfig: no panic, bounded time, and an error names the
// key (or, for the environment, the variable) that caused it; a malformed
// --set argument may be quoted whole instead.
func FuzzLoadConfigOverrides(f *testing.F) {
	for _, s := range [][4]string{
		{"train.steps", "50", "TRAIN__STEPS", "20"},
		{"train.steps", "abc", "SEED", "3"},
		{"rollout.temperature", "[1, 2]", "ROLLOUT__N", "x: ["},
		{"model", "3", "SEED", "-1"},
		{"strategies", "[{name: ppl}, 3]", "EVAL__SETS", "[a, '']"},
		{"seed", "&a [*a, *a]", "MODEL__MAX_LEN", "10"},
		{"train.clip_low", "1e400", "BENCH_ENGINE", "cpu"},
		{"", "1", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, setKey, setValue, envName, envValue string) {
		set := setKey + "=" + setValue
		env := "CDE_" + envName + "=" + envValue
		start := time.Now()
		_, err := LoadConfig(LoadOptions{Sets: []string{set}, Env: []string{env}})
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("LoadConfig took %v", d)
		}
		if err == nil {
			return
		}
		msg := err.Error()
		// What LoadConfig itself reads as the key and the variable name.
		key, _, _ := strings.Cut(set, "=")
		name, _, _ := strings.Cut(env, "=")
		envKey := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "CDE_")), "__", ".")
		quotesArg := strings.Contains(msg, set) || strings.Contains(msg, strconv.Quote(set))
		if !namesKey(msg, key) && !namesKey(msg, envKey) && !strings.Contains(msg, name) && !quotesArg {
			t.Fatalf("--set %q, env %q: error names neither key: %v", set, env, err)
		}
	})
}

// namesKey reports whether msg names key: the whole dotted path, the leading
// part of it that is unknown ("config: foo: unknown key" for foo.bar), or,
// for an error that a check on a neighbouring key reports, its last element.
func namesKey(msg, key string) bool {
	if key == "" {
		return false
	}
	if strings.Contains(msg, key) {
		return true
	}
	elems := strings.Split(key, ".")
	for i := 1; i < len(elems); i++ {
		if strings.Contains(msg, strings.Join(elems[:i], ".")+":") {
			return true
		}
	}
	last := elems[len(elems)-1]
	return last != "" && strings.Contains(msg, last)
}
