package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Split patterns that the hand-written scanner implements. Go's regexp has no
// lookahead, so each known pattern string is recognised and matched by
// scanSplit; any other pattern is refused when the file is loaded.
const (
	// patternQwen2 is the Split regex of Qwen2, Qwen2.5 and Qwen3.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternLlama3 is the Split regex of Llama-3: digits come in runs of up to three.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// knownPatterns maps a recognised regex to the longest digit run it takes.
var knownPatterns = map[string]int{
	patternQwen2:  1,
	patternLlama3: 3,
}

// Character classes of the scanner.
const (
	clOther  = iota // none of the below: [^\s\p{L}\p{N}]
	clLetter        // \p{L}
	clNumber        // \p{N}
	clSpace         // \s other than CR and LF
	clCRLF          // \r or \n (also \s)
)

var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		asciiClass[c] = classOfSlow(rune(c))
	}
}

func classOfSlow(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clCRLF
	case unicode.Is(unicode.White_Space, r):
		return clSpace
	case unicode.IsLetter(r):
		return clLetter
	case unicode.IsNumber(r):
		return clNumber
	}
	return clOther
}

// classAt returns the class of the rune at s[i] and its width. Invalid UTF-8
// bytes are one-byte runes of class clOther.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w <= 1 {
		return clOther, 1
	}
	return classOfSlow(r), w
}

func isSpaceClass(c uint8) bool { return c == clSpace || c == clCRLF }

// matchContraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i] (which is '\”)
// and returns the match length, or 0.
func matchContraction(s string, i int) int {
	// Case-insensitive letters as the reference matches them: ASCII in either
	// case, and U+017F (long s), which folds to 's'.
	at := func(j int, lower byte) int {
		if j >= len(s) {
			return 0
		}
		c := s[j]
		if c|0x20 == lower {
			return 1
		}
		if lower == 's' && j+1 < len(s) && c == 0xC5 && s[j+1] == 0xBF {
			return 2
		}
		return 0
	}
	j := i + 1
	for _, l := range []byte{'s', 't', 'm', 'd'} {
		if n := at(j, l); n > 0 {
			return 1 + n
		}
	}
	for _, p := range [][2]byte{{'r', 'e'}, {'v', 'e'}, {'l', 'l'}} {
		if n := at(j, p[0]); n > 0 {
			if m := at(j+n, p[1]); m > 0 {
				return 1 + n + m
			}
		}
	}
	return 0
}

// scanSplit calls emit with the end of each successive match of the
// Qwen2/Llama-3 pattern in s (maxDigits is 1 or 3). Every rune is matched by
// some alternative, so the matches tile s.
func scanSplit(s string, maxDigits int, emit func(end int)) {
	n := len(s)
	i := 0
	for i < n {
		end := scanOne(s, i, maxDigits)
		emit(end)
		i = end
	}
}

// scanOne returns the end of the match that starts at s[i], trying the
// pattern's alternatives in order as a backtracking engine would.
func scanOne(s string, i, maxDigits int) int {
	n := len(s)
	c0, w0 := classAt(s, i)
	// 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if m := matchContraction(s, i); m > 0 {
			return i + m
		}
	}
	// 2. [^\r\n\p{L}\p{N}]?\p{L}+
	letters := func(j int) int {
		for j < n {
			c, w := classAt(s, j)
			if c != clLetter {
				break
			}
			j += w
		}
		return j
	}
	if c0 == clLetter {
		return letters(i + w0)
	}
	if c0 != clCRLF && c0 != clNumber && i+w0 < n {
		if c1, w1 := classAt(s, i+w0); c1 == clLetter {
			return letters(i + w0 + w1)
		}
	}
	// 3. \p{N} or \p{N}{1,3}
	if c0 == clNumber {
		j := i + w0
		for k := 1; k < maxDigits && j < n; k++ {
			c, w := classAt(s, j)
			if c != clNumber {
				break
			}
			j += w
		}
		return j
	}
	// 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if s[i] == ' ' {
		j++
	}
	if j < n {
		if c, _ := classAt(s, j); c == clOther {
			for j < n {
				c, w := classAt(s, j)
				if c != clOther {
					break
				}
				j += w
			}
			for j < n && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			return j
		}
	}
	// Only whitespace is left (every other class matched above).
	// The whitespace run [i, e) and the end of its last CR/LF.
	e, lastNL := i, -1
	prev := i
	for e < n {
		c, w := classAt(s, e)
		if !isSpaceClass(c) {
			break
		}
		if c == clCRLF {
			lastNL = e + w
		}
		prev = e
		e += w
	}
	// 5. \s*[\r\n]+
	if lastNL >= 0 {
		return lastNL
	}
	// 6. \s+(?!\S): the whole run at the end of s, else all but its last rune.
	if e == n {
		return e
	}
	if prev > i {
		return prev
	}
	// 7. \s+
	return e
}
