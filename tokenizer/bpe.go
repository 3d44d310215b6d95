package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// merge is one BPE merge rule: its rank (lower merges first) and the id of
// the merged token.
type merge struct {
	rank int32
	id   int32
}

// bpe is a BPE model: byte-level (symbols are bytes) or, for
// SentencePiece-style files, char-level (symbols are runes, with byte
// fallback for runes outside the vocabulary).
type bpe struct {
	byteID       [256]int32       // id of each single-byte token
	rawVocab     map[string]int32 // token ids keyed by their raw bytes
	merges       map[uint64]merge // keyed by pairKey(left, right)
	ignoreMerges bool             // a whole word in the vocabulary is one token

	charLevel    bool
	vocab        map[string]int32 // char-level: token ids by text
	byteFallback bool
	byteToken    [256]int32 // char-level: id of "<0xXX>", -1 when absent
	unk          int32      // char-level: unknown-token id, -1 when absent
	fuseUnk      bool

	mu    sync.RWMutex
	cache map[string][]int32
}

const (
	maxCache     = 1 << 16
	maxCachedLen = 256 // longer words are not cached
)

// byteTokenName is the vocabulary entry of a fallback byte.
func byteTokenName(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// encodeWord appends the ids of one pre-token (raw bytes) to dst.
func (m *bpe) encodeWord(dst []int32, word string) []int32 {
	if len(word) == 1 && !m.charLevel {
		return append(dst, m.byteID[word[0]])
	}
	if m.ignoreMerges {
		v := m.rawVocab
		if m.charLevel {
			v = m.vocab
		}
		if id, ok := v[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) > maxCachedLen {
		return append(dst, m.merge(m.initial(word))...)
	}
	m.mu.RLock()
	ids, ok := m.cache[word]
	m.mu.RUnlock()
	if ok {
		return append(dst, ids...)
	}
	ids = m.merge(m.initial(word))
	m.mu.Lock()
	if len(m.cache) < maxCache {
		// Clone: word is a substring of the caller's text, which the
		// cache must not keep alive.
		m.cache[strings.Clone(word)] = ids
	}
	m.mu.Unlock()
	return append(dst, ids...)
}

// initial returns the symbols of word before any merge.
func (m *bpe) initial(word string) []int32 {
	ids := make([]int32, 0, len(word))
	if !m.charLevel {
		for i := 0; i < len(word); i++ {
			ids = append(ids, m.byteID[word[i]])
		}
		return ids
	}
	prevUnk := false
	for i := 0; i < len(word); {
		_, w := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+w]
		i += w
		if id, ok := m.vocab[ch]; ok {
			ids = append(ids, id)
			prevUnk = false
			continue
		}
		if m.byteFallback && m.hasByteTokens(ch) {
			for k := 0; k < len(ch); k++ {
				ids = append(ids, m.byteToken[ch[k]])
			}
			prevUnk = false
			continue
		}
		if m.unk >= 0 {
			if !(m.fuseUnk && prevUnk) {
				ids = append(ids, m.unk)
			}
			prevUnk = true
		}
		// Without an unknown token the rune is dropped, as the reference does.
	}
	return ids
}

func (m *bpe) hasByteTokens(ch string) bool {
	for k := 0; k < len(ch); k++ {
		if m.byteToken[ch[k]] < 0 {
			return false
		}
	}
	return true
}

// merge applies the merge rules to the symbols ids, lowest rank first and
// leftmost first among equal ranks.
func (m *bpe) merge(ids []int32) []int32 {
	n := len(ids)
	if n < 2 {
		return ids
	}
	next := make([]int32, n)
	prev := make([]int32, n)
	for i := 0; i < n; i++ {
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
