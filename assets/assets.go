// Package assets embeds the base policies shipped with cde (assets/base),
// so `model.checkpoint: auto` finds them wherever cde-run runs, not only
// from the repository root.
package assets

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed base
var files embed.FS

// HasBase reports whether a base policy with this key is shipped.
func HasBase(key string) bool {
	_, err := fs.Stat(files, "base/"+key+"/policy.gob")
	return err == nil
}

// ExtractBase writes the shipped base policy key into dir (through a
// temporary directory and a rename, so a crash leaves nothing half-made).
// A dir that already holds the policy is left as it is.
func ExtractBase(key, dir string) error {
	if !HasBase(key) {
		return fmt.Errorf("no shipped base policy %q", key)
	}
	if _, err := os.Stat(filepath.Join(dir, "policy.gob")); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".extract")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root := "base/" + key
	err = fs.WalkDir(files, root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		return os.WriteFile(filepath.Join(tmp, rel), data, 0o644)
	})
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "policy.gob")); statErr == nil {
			return nil // another process extracted it first
		}
		return errors.Join(fmt.Errorf("extract base policy %s", key), err)
	}
	return nil
}
