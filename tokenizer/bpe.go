package tokenizer

import "sync"

// merge is one BPE merge rule: its rank (lower merges first) and the id of
// the merged token.
type merge struct {
	rank int32
	id   int32
}

// bpe is a byte-level BPE model.
type bpe struct {
	byteID       [256]int32       // id of each single-byte token
	rawVocab     map[string]int32 // token ids keyed by their raw bytes
	merges       map[uint64]merge // keyed by pairKey(left, right)
	ignoreMerges bool             // a whole word in the vocabulary is one token

	mu    sync.RWMutex
	cache map[string][]int32
}

const maxCache = 1 << 16

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// encodeWord appends the ids of one pre-token (raw bytes) to dst.
func (m *bpe) encodeWord(dst []int32, word string) []int32 {
	if len(word) == 1 {
		return append(dst, m.byteID[word[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.rawVocab[word]; ok {
			return append(dst, id)
		}
	}
	m.mu.RLock()
	ids, ok := m.cache[word]
	m.mu.RUnlock()
	if ok {
		return append(dst, ids...)
	}
	ids = m.merge(word)
	m.mu.Lock()
	if len(m.cache) < maxCache {
		m.cache[word] = ids
	}
	m.mu.Unlock()
	return append(dst, ids...)
}

// merge applies the merge rules to word, lowest rank first and leftmost
// first among equal ranks.
func (m *bpe) merge(word string) []int32 {
	n := len(word)
	ids := make([]int32, n)
	next := make([]int32, n)
	prev := make([]int32, n)
	for i := 0; i < n; i++ {
		ids[i] = m.byteID[word[i]]
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
	}
	next[n-1] = -1
	var h minHeap
	for i := 0; i+1 < n; i++ {
		if mg, ok := m.merges[pairKey(ids[i], ids[i+1])]; ok {
			h.push(uint64(mg.rank)<<32 | uint64(i))
		}
	}
	alive := make([]bool, n)
	for i := range alive {
		alive[i] = true
	}
	for h.len() > 0 {
		top := h.pop()
		rank, pos := int32(top>>32), int32(uint32(top))
		if !alive[pos] || next[pos] < 0 {
			continue
		}
		r := next[pos]
		mg, ok := m.merges[pairKey(ids[pos], ids[r])]
		if !ok || mg.rank != rank {
			continue // stale: a neighbour changed since this was queued
		}
		ids[pos] = mg.id
		alive[r] = false
		next[pos] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = pos
		}
		if p := prev[pos]; p >= 0 {
			if mg, ok := m.merges[pairKey(ids[p], ids[pos])]; ok {
				h.push(uint64(mg.rank)<<32 | uint64(p))
			}
		}
		if q := next[pos]; q >= 0 {
			if mg, ok := m.merges[pairKey(ids[pos], ids[q])]; ok {
				h.push(uint64(mg.rank)<<32 | uint64(pos))
			}
		}
	}
	out := make([]int32, 0, n)
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

// minHeap is a binary min-heap of rank<<32|position keys.
type minHeap struct{ a []uint64 }

func (h *minHeap) len() int { return len(h.a) }

func (h *minHeap) push(x uint64) {
	h.a = append(h.a, x)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h.a[p] <= h.a[i] {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *minHeap) pop() uint64 {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	i := 0
	for {
		l, r, s := 2*i+1, 2*i+2, i
		if l < last && h.a[l] < h.a[s] {
			s = l
		}
		if r < last && h.a[r] < h.a[s] {
			s = r
		}
		if s == i {
			break
		}
		h.a[i], h.a[s] = h.a[s], h.a[i]
		i = s
	}
	return top
}
