package core

import (
	"math"
	"testing"
)

// pass^k worked by hand: C(c,k)/C(n,k).
func TestPassHatK(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{4, 2, 1, 0.5},             // 2/4
		{4, 2, 2, 1.0 / 6},         // C(2,2)/C(4,2) = 1/6
		{4, 1, 2, 0},               // c < k
		{5, 5, 3, 1},               // all correct
		{10, 7, 3, 35.0 / 120},     // C(7,3)/C(10,3)
		{256, 128, 2, 127.0 / 510}, // (128*127)/(256*255)
	} {
		got, err := PassHatK(c.n, c.c, c.k)
		if err != nil || math.Abs(got-c.want) > 1e-15 {
			t.Errorf("pass^%d(n=%d, c=%d) = %v (%v), want %v", c.k, c.n, c.c, got, err, c.want)
		}
	}
	for _, bad := range [][3]int{{0, 0, 1}, {4, 5, 1}, {4, 2, 5}, {4, 2, 0}} {
		if _, err := PassHatK(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("pass^k%v: no error", bad)
		}
	}
}

// maj@k worked by hand.
func TestMajAtK(t *testing.T) {
	keys := []string{"7", "", "5", "5", "7", "9"}
	correct := []bool{false, false, true, true, false, false}
	for _, c := range []struct {
		k    int
		want bool
	}{
		{1, false}, // "7" alone, wrong
		{2, false}, // "7" (the empty key does not vote)
		{3, false}, // "7" and "5" tie 1-1: "7" came first
		{4, true},  // "5" twice
		{5, false}, // 2-2: "7" came first
		{6, false}, // 2-2-1: "7"
		{9, false}, // k above n: all six
	} {
		if got := MajAtK(keys, correct, c.k); got != c.want {
			t.Errorf("maj@%d = %v, want %v", c.k, got, c.want)
		}
	}
	if MajAtK([]string{"", ""}, []bool{true, true}, 2) {
		t.Error("no answer voted right")
	}
}
