package tasks

import (
	"strings"
	"unicode/utf8"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks/answer"
)

// Token ids of the character tokenizer. The layout is fixed so checkpoints
// stay compatible:
//
//	0      PAD
//	1      BOS
//	2      EOS
//	3      "Answer:" (one token for the whole marker)
//	4..98  printable ASCII ' ' (32) .. '~' (126), in code-point order
//	99     '\n'
//	100    UNK (any other rune)
const (
	PadID     int32 = 0
	BosID     int32 = 1
	EosID     int32 = 2
	AnswerID  int32 = 3
	firstChr  int32 = 4
	NewlineID int32 = firstChr + 126 - 32 + 1
	UnkID     int32 = NewlineID + 1
	vocabSize       = int(UnkID) + 1
)

// AnswerMarker introduces the final answer in a response.
const AnswerMarker = answer.Marker

// unkText is what Decode prints for the UNK token (and for ids outside the
// vocabulary): the Unicode replacement character.
const unkText = "\uFFFD"

// CharTokenizer is a character-level tokenizer: one token per printable
// ASCII character or newline, plus the single token "Answer:". Any other rune
// (tab, '\r', non-ASCII, invalid UTF-8) encodes to UNK, so Encode never fails
// but Decode(Encode(s)) == s only for text within the vocabulary.
type CharTokenizer struct{}

var _ core.Tokenizer = CharTokenizer{}

// NewCharTokenizer returns the character tokenizer.
func NewCharTokenizer() CharTokenizer { return CharTokenizer{} }

// Encode maps text to ids, matching "Answer:" greedily before single chars.
// It adds no BOS or EOS.
func (CharTokenizer) Encode(text string) []int32 {
	ids := make([]int32, 0, len(text))
	for i := 0; i < len(text); {
		if strings.HasPrefix(text[i:], AnswerMarker) {
			ids = append(ids, AnswerID)
			i += len(AnswerMarker)
			continue
		}
		c := text[i]
		switch {
		case c >= 32 && c <= 126:
			ids = append(ids, firstChr+int32(c)-32)
			i++
		case c == '\n':
			ids = append(ids, NewlineID)
			i++
		case c < 0x80:
			ids = append(ids, UnkID)
			i++
		default:
			// One UNK per rune (an invalid byte counts as one rune).
			_, size := utf8.DecodeRuneInString(text[i:])
			ids = append(ids, UnkID)
			i += size
		}
	}
	return ids
}

// Decode maps ids back to text. PAD and BOS are skipped, decoding stops at
// the first EOS, and UNK (or any id outside the vocabulary) decodes to U+FFFD.
func (CharTokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id == PadID || id == BosID:
		case id == EosID:
			return b.String()
		case id == AnswerID:
			b.WriteString(AnswerMarker)
		case id >= firstChr && id < NewlineID:
			b.WriteByte(byte(id - firstChr + 32))
		case id == NewlineID:
			b.WriteByte('\n')
		default:
			b.WriteString(unkText)
		}
	}
	return b.String()
}

// VocabSize is 101: 4 special ids, 95 printable chars, newline and UNK.
func (CharTokenizer) VocabSize() int { return vocabSize }

// BOS returns 1.
func (CharTokenizer) BOS() int32 { return BosID }

// EOS returns 2.
func (CharTokenizer) EOS() int32 { return EosID }

// PAD returns 0.
func (CharTokenizer) PAD() int32 { return PadID }
