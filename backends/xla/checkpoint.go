package xla

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/cde-rl/cde/core"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"
)

// checkpoint is one net's saved state: every variable (weights and Adam
// moments) and the Adam step count. In memory the variables are Vars; on
// disk (writeGob) they are Sorted, in the order of their paths, because gob
// writes a map in Go's random iteration order and two saves of one state
// would then differ in bytes. Reading (decodeGob) fills Vars from Sorted,
// or takes Vars as files written before Sorted existed hold it.
type checkpoint struct {
	Config   ModelConfig
	AdamStep int
	Vars     map[string]savedTensor
	Sorted   []namedTensor
}

type savedTensor struct {
	Dims []int
	Data []float32
}

// namedTensor is a variable on disk. Its fields are named (gob skips an
// embedded field of an unexported type).
type namedTensor struct {
	Path string
	Dims []int
	Data []float32
}

// forDisk is ck with its variables in Sorted, ordered by path, and Vars
// empty.
func (ck checkpoint) forDisk() checkpoint {
	paths := make([]string, 0, len(ck.Vars))
	for p := range ck.Vars {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	sorted := make([]namedTensor, 0, len(paths)+len(ck.Sorted))
	for _, p := range paths {
		sorted = append(sorted, namedTensor{p, ck.Vars[p].Dims, ck.Vars[p].Data})
	}
	ck.Sorted, ck.Vars = append(sorted, ck.Sorted...), nil
	return ck
}

// fromDisk moves Sorted into Vars; a path saved twice is an error.
func (ck *checkpoint) fromDisk() error {
	if len(ck.Sorted) == 0 {
		ck.Sorted = nil
		return nil
	}
	if ck.Vars == nil {
		ck.Vars = make(map[string]savedTensor, len(ck.Sorted))
	}
	for _, nt := range ck.Sorted {
		if _, dup := ck.Vars[nt.Path]; dup {
			return fmt.Errorf("variable %s saved twice", nt.Path)
		}
		ck.Vars[nt.Path] = savedTensor{nt.Dims, nt.Data}
	}
	ck.Sorted = nil
	return nil
}

func (n *net) snapshot() (checkpoint, error) {
	ck := checkpoint{Config: n.cfg, AdamStep: n.adamStep, Vars: map[string]savedTensor{}}
	for v := range n.ctx.IterVariables() {
		if isAccum(v) || n.frozen(v) {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return ck, err
		}
		ck.Vars[v.Path()] = savedTensor{Dims: val.Shape().Dimensions, Data: tensors.MustCopyFlatData[float32](val)}
	}
	return ck, nil
}

// restore sets every variable from ck after checking all of them (sizes,
// shapes, data length, finiteness), so a bad checkpoint changes nothing.
func (n *net) restore(ck checkpoint, what string) error {
	if ck.Config.Vocab != n.cfg.Vocab || ck.Config.Layers != n.cfg.Layers || ck.Config.DModel != n.cfg.DModel ||
		ck.Config.Heads != n.cfg.Heads || ck.Config.FF != n.cfg.FF || ck.Config.MaxLen != n.cfg.MaxLen || ck.Config.ValueK != n.cfg.ValueK ||
		!reflect.DeepEqual(ck.Config.HF, n.cfg.HF) || !reflect.DeepEqual(ck.Config.LoRA, n.cfg.LoRA) {
		return fmt.Errorf("checkpoint %s: model sizes %+v differ from the configured %+v", what, ck.Config, n.cfg)
	}
	if ck.AdamStep < 0 {
		return fmt.Errorf("checkpoint %s: negative Adam step count %d", what, ck.AdamStep)
	}
	var vars []*model.Variable
	for v := range n.ctx.IterVariables() {
		if isAccum(v) || n.frozen(v) {
			continue
		}
		st, ok := ck.Vars[v.Path()]
		if !ok {
			return fmt.Errorf("checkpoint %s: variable %s missing", what, v.Path())
		}
		if !slices.Equal(st.Dims, v.Shape().Dimensions) {
			return fmt.Errorf("checkpoint %s: variable %s has shape %v, model wants %v", what, v.Path(), st.Dims, v.Shape().Dimensions)
		}
		if len(st.Data) != v.Shape().Size() {
			return fmt.Errorf("checkpoint %s: variable %s has %d values for shape %v", what, v.Path(), len(st.Data), st.Dims)
		}
		for i, x := range st.Data {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("checkpoint %s: variable %s[%d] is %v", what, v.Path(), i, x)
			}
		}
		vars = append(vars, v)
	}
	for _, v := range vars {
		st := ck.Vars[v.Path()]
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(slices.Clone(st.Data), st.Dims...)); err != nil {
			return err
		}
	}
	n.adamStep = ck.AdamStep
	return nil
}

// Save writes policy.gob (and critic.gob, and reference.gob for the KL
// term's frozen policy) under dir, each written to a
// temporary file and renamed, so a crash never leaves a torn file.
func (b *Backend) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	nets := map[string]*net{"policy": b.policy}
	if b.critic != nil {
		nets["critic"] = b.critic
	}
	if b.ref != nil && !b.ref.view {
		nets["reference"] = b.ref
	}
	for name, n := range nets {
		ck, err := n.snapshot()
		if err != nil {
			return err
		}
		if err := writeGob(filepath.Join(dir, name+".gob"), ck); err != nil {
			return err
		}
	}
	return nil
}

// SavedVariable is one variable of a saved net: its dimensions and
// values, row-major.
type SavedVariable struct {
	Dims []int
	Data []float32
}

// ReadSavedVariables reads a net file Save wrote (DIR/policy.gob,
// critic.gob, reference.gob), either on-disk layout, and returns every
// variable by its GoMLX path ("/layer0/wq"; the Adam moments under
// "/adam..."), so tools outside this package need not know the format.
func ReadSavedVariables(path string) (map[string]SavedVariable, error) {
	var ck checkpoint
	if err := readGob(path, &ck); err != nil {
		return nil, err
	}
	out := make(map[string]SavedVariable, len(ck.Vars))
	for p, v := range ck.Vars {
		out[p] = SavedVariable{Dims: v.Dims, Data: v.Data}
	}
	return out, nil
}

// Load restores what Save wrote. A directory holding only a policy (a
// pretrained base) leaves the critic at its initial weights.
func (b *Backend) Load(dir string) error {
	var ck checkpoint
	if err := readGob(filepath.Join(dir, "policy.gob"), &ck); err != nil {
		return err
	}
	if err := b.policy.restore(ck, dir+"/policy.gob"); err != nil {
		return err
	}
	if path := filepath.Join(dir, "reference.gob"); fileExists(path) && b.policy.cfg.LoRA == nil {
		var rc checkpoint
		if err := readGob(path, &rc); err != nil {
			return err
		}
		ref, err := newNet(b.engine, b.policy.cfg, 0, nil, nil, nil)
		if err != nil {
			return err
		}
		if err := ref.restore(rc, path); err != nil {
			return err
		}
		b.ref = ref
	}
	if b.critic != nil {
		path := filepath.Join(dir, "critic.gob")
		if _, err := os.Stat(path); err == nil {
			var cc checkpoint
			if err := readGob(path, &cc); err != nil {
				return err
			}
			if err := b.critic.restore(cc, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// ResetOptimizer zeroes the policy's Adam state (used when RL starts from a
// supervised checkpoint).
func (b *Backend) ResetOptimizer() {
	for v := range b.policy.ctx.IterVariables() {
		if len(v.Scope()) >= 5 && v.Scope()[:5] == "/adam" {
			v.MustSetValue(tensors.FromShape(v.Shape()))
		}
	}
	b.policy.adamStep = 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writeGob(path string, v any) error {
	if ck, ok := v.(checkpoint); ok {
		v = ck.forDisk()
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	return core.WriteFileAtomic(path, buf.Bytes())
}

func readGob(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return decodeGob(data, path, v)
}

// decodeGob decodes one gob value from data. The stream's message framing
// is checked first (the gob decoder allocates whatever length a message
// claims, up to 1 GiB, before reading it), and a decoder panic on hostile
// input becomes an error naming what.
func decodeGob(data []byte, what string, v any) (err error) {
	if err := checkGobFraming(data); err != nil {
		return fmt.Errorf("checkpoint %s: corrupt gob data: %w", what, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("checkpoint %s: corrupt gob data: %v", what, p)
		}
	}()
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("checkpoint %s: %w", what, err)
	}
	if ck, ok := v.(*checkpoint); ok {
		if err := ck.fromDisk(); err != nil {
			return fmt.Errorf("checkpoint %s: %w", what, err)
		}
	}
	return nil
}

// checkGobFraming walks the length-prefixed messages of a gob stream and
// reports the first whose length runs past the data. A length is a gob
// unsigned integer: one byte below 128, else a byte holding minus the
// count of big-endian bytes that follow.
func checkGobFraming(data []byte) error {
	for off := 0; off < len(data); {
		b := data[off]
		off++
		n := uint64(b)
		if b >= 0x80 {
			k := int(-int8(b))
			if k < 1 || k > 8 || off+k > len(data) {
				return fmt.Errorf("bad message length at byte %d", off-1)
			}
			n = 0
			for _, c := range data[off : off+k] {
				n = n<<8 | uint64(c)
			}
			off += k
		}
		if n > uint64(len(data)-off) {
			return fmt.Errorf("message at byte %d claims %d bytes, %d remain", off, n, len(data)-off)
		}
		off += int(n)
	}
	return nil
}
