package core

import "unsafe"

// A step's per-token signals are columns: each one contiguous block of
// float64 for the whole batch, sequence i's tokens at [Offsets()[i],
// Offsets()[i+1]) (times the width: K for Values and HeadMask, 1 for the
// others). A Sequence's fields (LogProbs, Values, Advantages, ...) are
// windows onto those blocks, capacity-limited, so a strategy reads
// s.LogProbs[t] as before while the batch as a whole is one array per
// signal that the plugin transport hands over without gathering, and that
// the garbage collector sees as one object.
//
// Code that makes a per-token signal for every sequence allocates its
// column with NewColumn (or TokenRows, for a hook's answer); a Sequence
// built one at a time (a test, a rollout file) may hold slices of its own,
// which every reader accepts: only the transport's zero-copy path needs
// the column to be contiguous (Column reports whether it is).

// Allocator makes the blocks a Rollout's columns live in. The plugin host
// gives one whose memory plugins map (the shared-memory transport), so a
// column is handed over without a copy; nil is the Go heap.
type Allocator interface {
	// Float64s returns n zeroed float64s.
	Float64s(n int) []float64
}

// StepAllocator is an Allocator whose blocks live for one training step:
// the trainer calls Reset at the start of every step, after which the
// previous step's blocks may be handed out again.
type StepAllocator interface {
	Allocator
	Reset() error
}

// Offsets returns the token offset of every sequence in the batch's
// columns, n+1 entries: sequence i's tokens are [o[i], o[i+1]).
func (r *Rollout) Offsets() []int {
	o := make([]int, len(r.Seqs)+1)
	for i := range r.Seqs {
		o[i+1] = o[i] + r.Seqs[i].Len()
	}
	return o
}

// alloc returns n zeroed float64s from r.Alloc, or the Go heap.
func (r *Rollout) alloc(n int) []float64 {
	if r.Alloc != nil && n > 0 {
		if b := r.Alloc.Float64s(n); len(b) == n {
			return b
		}
	}
	return make([]float64, n)
}

// NewColumn allocates one zeroed block of NumTokens()*width float64s and
// points field(s) of every sequence at its window (T*width entries,
// capacity-limited). It returns the block.
func (r *Rollout) NewColumn(width int, field func(s *Sequence) *[]float64) []float64 {
	block, rows := r.TokenRows(width)
	for i := range r.Seqs {
		*field(&r.Seqs[i]) = rows[i]
	}
	if len(block) > 0 {
		r.blocks = append(r.blocks, block)
	}
	return block
}

// TokenRows allocates one zeroed block of NumTokens()*width float64s and
// returns it with its per-sequence windows (T_i*width entries each,
// capacity-limited): the shape of a hook's per-token answer
// (AdvantageBonus, TokenLoss, HeadMasks) made as one column.
func (r *Rollout) TokenRows(width int) (block []float64, rows [][]float64) {
	o := r.Offsets()
	block = r.alloc(o[len(r.Seqs)] * width)
	rows = make([][]float64, len(r.Seqs))
	for i := range r.Seqs {
		a, b := o[i]*width, o[i+1]*width
		rows[i] = block[a:b:b]
	}
	return block, rows
}

// Column returns the block that field's windows form when they lie end to
// end in memory in sequence order, each of T_i*width entries, within one
// block NewColumn made for this rollout, and false otherwise (a sequence
// without the signal, rows of their own, a batch reordered after the
// column was made). The block aliases the sequences' windows.
func (r *Rollout) Column(width int, field func(s *Sequence) []float64) ([]float64, bool) {
	if len(r.Seqs) == 0 || width <= 0 {
		return nil, false
	}
	var first, next unsafe.Pointer
	total := 0
	for i := range r.Seqs {
		v := field(&r.Seqs[i])
		n := r.Seqs[i].Len() * width
		if len(v) != n {
			return nil, false
		}
		if n == 0 {
			continue
		}
		p := unsafe.Pointer(unsafe.SliceData(v))
		if first == nil {
			first = p
		} else if p != next {
			return nil, false
		}
		next = unsafe.Add(p, n*8)
		total += n
	}
	if first == nil {
		return []float64{}, true
	}
	lo, hi := uintptr(first), uintptr(first)+uintptr(total)*8
	for _, b := range r.blocks {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if lo >= p && hi <= p+uintptr(len(b))*8 {
			return b[(lo-p)/8 : (hi-p)/8 : (hi-p)/8], true
		}
	}
	return nil, false
}

// Heads is K, the number of value heads Values holds per token
// (len(Values) / Len()); 0 without values or tokens.
func (s *Sequence) Heads() int {
	if len(s.Response) == 0 {
		return 0
	}
	return len(s.Values) / len(s.Response)
}

// ValueRow returns the K head values of token t, a window of Values.
func (s *Sequence) ValueRow(t int) []float64 {
	k := s.Heads()
	return s.Values[t*k : (t+1)*k : (t+1)*k]
}

// MaskRow returns token t's K head-mask weights, a window of HeadMask
// (nil when HeadMask is nil: every head sees the token).
func (s *Sequence) MaskRow(t int) []float64 {
	if s.HeadMask == nil || len(s.Response) == 0 {
		return nil
	}
	k := len(s.HeadMask) / len(s.Response)
	return s.HeadMask[t*k : (t+1)*k : (t+1)*k]
}

// columnFields are the per-token float64 fields of a Sequence with their
// width: 1, or 0 for the head axis (K, from Rollout.ValueHeads or the
// sequences).
var columnFields = []struct {
	name  string
	heads bool
	get   func(s *Sequence) *[]float64
}{
	{"log-probs", false, func(s *Sequence) *[]float64 { return &s.LogProbs }},
	{"entropies", false, func(s *Sequence) *[]float64 { return &s.Entropies }},
	{"values", true, func(s *Sequence) *[]float64 { return &s.Values }},
	{"ref log-probs", false, func(s *Sequence) *[]float64 { return &s.RefLogProbs }},
	{"rollout log-probs", false, func(s *Sequence) *[]float64 { return &s.RolloutLogProbs }},
	{"head masks", true, func(s *Sequence) *[]float64 { return &s.HeadMask }},
	{"advantages", false, func(s *Sequence) *[]float64 { return &s.Advantages }},
	{"advantage bonuses", false, func(s *Sequence) *[]float64 { return &s.AdvantageBonus }},
	{"returns", false, func(s *Sequence) *[]float64 { return &s.Returns }},
	{"pg weights", false, func(s *Sequence) *[]float64 { return &s.PGWeight }},
	{"abs-KL coefficients", false, func(s *Sequence) *[]float64 { return &s.AbsKLCoef }},
}

// Pack makes every per-token signal that all sequences hold (T_i entries,
// or T_i*K for Values and HeadMask) one column, copying the sequences'
// rows into a block from r.Alloc where they are not one already; a signal
// some sequence lacks or holds in another length is left as it is. The
// numbers are unchanged. The trainer packs each step's batch once it is
// collected, so that every later stage reads and writes columns.
func (r *Rollout) Pack() {
	if len(r.Seqs) == 0 {
		return
	}
	for _, f := range columnFields {
		width := 1
		if f.heads {
			width = r.ValueHeads
			if width <= 0 {
				for i := range r.Seqs {
					if s := &r.Seqs[i]; s.Len() > 0 && len(*f.get(s)) > 0 {
						width = len(*f.get(s)) / s.Len()
						break
					}
				}
			}
			if width <= 0 {
				continue
			}
		}
		all, any := true, false
		for i := range r.Seqs {
			s := &r.Seqs[i]
			v := *f.get(s)
			if len(v) != s.Len()*width || (v == nil && s.Len() > 0) {
				all = false
				break
			}
			any = any || len(v) > 0
		}
		if !all || !any {
			continue
		}
		if _, ok := r.Column(width, func(s *Sequence) []float64 { return *f.get(s) }); ok {
			continue
		}
		old := make([][]float64, len(r.Seqs))
		for i := range r.Seqs {
			old[i] = *f.get(&r.Seqs[i])
		}
		r.NewColumn(width, f.get)
		for i := range r.Seqs {
			copy(*f.get(&r.Seqs[i]), old[i])
		}
	}
}
