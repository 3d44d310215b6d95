package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ClaimsFile records the claims a bench had when it first started in its
// results directory. A claim in the spec that is not there, or whose
// definition changed since, was registered after runs had begun: the
// report shows its numbers as exploratory and gives it no verdict, so
// a claim cannot be written after seeing the results and then judged.
const ClaimsFile = "claims-registered.json"

type registration struct {
	Registered string            `json:"registered"` // RFC 3339, when the bench first started
	Claims     map[string]string `json:"claims"`     // claim name -> sha256 of its definition
	// Note says how the record was made when not by the bench itself (one
	// reconstructed for a bench that predates registration).
	Note string `json:"note,omitempty"`
}

// claimHash identifies a claim's definition: arms, metric, direction,
// window and, when set, its equivalence margin and its family (not its
// name, which keys it). A margin or family added after the bench started
// makes the claim exploratory: both change what the verdict can be.
// Claims without them hash as they did before the two keys existed; so
// do claims without at (the axis and point of a claim at equal compute).
func claimHash(c Claim) string {
	def := []any{c.Better, c.Than, c.Metric, c.LowerIsBetter, max(c.Window, 1)}
	if c.Margin > 0 || c.Family != "" {
		def = append(def, c.Margin, c.Family)
	}
	if c.At != "" {
		// At equal compute: the axis and the point (null: the most both
		// arms reached). Claims without at hash as before the key existed.
		def = append(def, "at", c.At, c.AtValue)
	}
	b, _ := json.Marshal(def)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// registerClaims writes DIR/ClaimsFile with spec's claims unless it exists
// (a rerun keeps the first registration).
func registerClaims(spec *Spec, dir string) error {
	path := filepath.Join(dir, ClaimsFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	reg := registration{Registered: time.Now().UTC().Format(time.RFC3339), Claims: map[string]string{}}
	for _, c := range spec.Claims {
		reg.Claims[c.Name] = claimHash(c)
	}
	data, err := json.MarshalIndent(reg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// registered reads DIR/ClaimsFile: nil when the directory has none (a
// bench made before registration existed: its claims are judged).
func registered(dir string) (*registration, error) {
	data, err := os.ReadFile(filepath.Join(dir, ClaimsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var reg registration
	if err := json.Unmarshal(data, &reg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ClaimsFile), err)
	}
	return &reg, nil
}

// exploratory reports whether claim c's definition was not registered
// when the bench started, under any name (a name is a label: renaming a
// registered claim keeps it registered). reg nil: no record, every claim
// counts as registered.
func (reg *registration) exploratory(c Claim) bool {
	if reg == nil {
		return false
	}
	h := claimHash(c)
	for _, r := range reg.Claims {
		if r == h {
			return false
		}
	}
	return true
}
