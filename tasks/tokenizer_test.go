package tasks

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTokenizerIDs(t *testing.T) {
	tok := NewCharTokenizer()
	if tok.PAD() != 0 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Fatalf("specials = %d %d %d, want 0 1 2", tok.PAD(), tok.BOS(), tok.EOS())
	}
	// 4 specials + 95 printable + '\n' + UNK.
	if got := tok.VocabSize(); got != 101 {
		t.Fatalf("VocabSize = %d, want 101", got)
	}
	cases := []struct {
		in   string
		want []int32
	}{
		{"", []int32{}},
		{" ", []int32{4}},
		{"0", []int32{20}},  // '0' = 48 -> 4+16
		{"A", []int32{37}},  // 'A' = 65 -> 4+33
		{"~", []int32{98}},  // '~' = 126 -> 4+94
		{"\n", []int32{99}}, // newline after the printables
		{"Answer: 85", []int32{3, 4, 28, 25}},
		{"AAnswer:", []int32{37, 3}},
		{"Answer", []int32{37, 82, 87, 91, 73, 86}}, // no colon: plain chars
		{"\t", []int32{100}},
		{"é", []int32{100}},              // one multi-byte rune -> one UNK
		{"a\xffb", []int32{69, 100, 70}}, // invalid byte -> one UNK
		{"Answer:Answer:", []int32{3, 3}},
	}
	for _, c := range cases {
		got := tok.Encode(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestTokenizerDecode(t *testing.T) {
	tok := NewCharTokenizer()
	cases := []struct {
		ids  []int32
		want string
	}{
		{[]int32{1, 3, 4, 28, 25, 2, 20}, "Answer: 85"}, // stops at EOS
		{[]int32{0, 1, 20, 0, 99}, "0\n"},               // skips PAD and BOS
		{[]int32{100, 500, -1}, "\uFFFD\uFFFD\uFFFD"},   // UNK and out of range
		{nil, ""},
	}
	for _, c := range cases {
		if got := tok.Decode(c.ids); got != c.want {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	tok := NewCharTokenizer()
	fixed := []string{"47+38=", "Answer: 85", "x\nAnswer: -3\n", "Answer:Answer", "~ !"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(10) == 0 {
				b[i] = '\n'
			} else {
				b[i] = byte(32 + rng.IntN(95))
			}
		}
		fixed = append(fixed, string(b))
	}
	for _, s := range fixed {
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 3 || int(id) >= tok.VocabSize()-1 {
				t.Fatalf("Encode(%q) produced id %d outside the char range", s, id)
			}
		}
		if got := tok.Decode(ids); got != s {
			t.Errorf("round trip %q -> %q", s, got)
		}
	}
}
