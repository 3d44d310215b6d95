package tasks

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cde-rl/cde/core"
)

// CountdownCanonical is the canonical form of a countdown expression: the
// key under which two answers count as one solution (the diversity metric
// distinct@k). Sums and products are flattened and their operands sorted,
// so that the form is the same under the commutativity and associativity
// of + and *, with a - b read as a + (-b) and a / b as a * (1/b):
//
//   - a sum is its positive terms sorted, joined by "+", then "-" and each
//     negative term, sorted: 25+3*7 and 7*3+25 are "25+3*7";
//     a-(b-c) is "a+c-b";
//   - a product is its numerator factors sorted, joined by "*", then "/"
//     and each denominator factor, sorted: a/(b/c) is "a*c/b";
//   - a parenthesised sum of one positive term is that term; any other sum
//     inside a product is a factor "(...)".
//
// Nothing else is identified: distributivity is not applied (3*(a+b) and
// 3*a+3*b stay two solutions), and a number written twice stays twice. An
// expression that CountdownExpr rejects is an error.
func CountdownCanonical(s string) (string, error) {
	if _, _, err := CountdownExpr(s); err != nil {
		return "", err
	}
	p := canonParser{s: s}
	sum, err := p.sum(0)
	if err != nil {
		return "", err
	}
	return sum.String(), nil
}

type (
	canonSum  struct{ pos, neg []canonProd }
	canonProd struct {
		num, den []canonFactor
	}
	canonFactor struct {
		n   string
		sum *canonSum // a sum that is not a single positive term
	}
)

func (f canonFactor) String() string {
	if f.sum != nil {
		return "(" + f.sum.String() + ")"
	}
	return f.n
}

func sortedStrings[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	slices.Sort(out)
	return out
}

func (p canonProd) String() string {
	var b strings.Builder
	b.WriteString(strings.Join(sortedStrings(p.num), "*"))
	for _, d := range sortedStrings(p.den) {
		b.WriteString("/" + d)
	}
	return b.String()
}

func (s canonSum) String() string {
	var b strings.Builder
	b.WriteString(strings.Join(sortedStrings(s.pos), "+"))
	for _, n := range sortedStrings(s.neg) {
		b.WriteString("-" + n)
	}
	return b.String()
}

// asProd is a sum used as a product operand: its one positive term, or a
// factor holding the whole sum.
func (s canonSum) asProd() canonProd {
	if len(s.pos) == 1 && len(s.neg) == 0 {
		return s.pos[0]
	}
	return canonProd{num: []canonFactor{{sum: &s}}}
}

// canonParser follows exprParser's grammar (CountdownExpr has checked the
// expression), building canonical forms instead of values.
type canonParser struct {
	s string
	i int
}

func (p *canonParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *canonParser) sum(depth int) (canonSum, error) {
	var out canonSum
	add := func(t canonProd, negative bool) {
		// A term that is a lone bracketed sum spills its terms.
		if len(t.num) == 1 && len(t.den) == 0 && t.num[0].sum != nil {
			inner := t.num[0].sum
			pos, neg := inner.pos, inner.neg
			if negative {
				pos, neg = neg, pos
			}
			out.pos, out.neg = append(out.pos, pos...), append(out.neg, neg...)
			return
		}
		if negative {
			out.neg = append(out.neg, t)
		} else {
			out.pos = append(out.pos, t)
		}
	}
	t, err := p.product(depth)
	if err != nil {
		return out, err
	}
	add(t, false)
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return out, nil
		}
		op := p.s[p.i]
		p.i++
		t, err := p.product(depth)
		if err != nil {
			return out, err
		}
		add(t, op == '-')
	}
}

func (p *canonParser) product(depth int) (canonProd, error) {
	a, err := p.atom(depth)
	if err != nil {
		return canonProd{}, err
	}
	out := a.asProd()
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/') {
			return out, nil
		}
		op := p.s[p.i]
		p.i++
		b, err := p.atom(depth)
		if err != nil {
			return canonProd{}, err
		}
		bp := b.asProd()
		if op == '*' {
			out.num, out.den = append(out.num, bp.num...), append(out.den, bp.den...)
		} else {
			out.num, out.den = append(out.num, bp.den...), append(out.den, bp.num...)
		}
	}
}

func (p *canonParser) atom(depth int) (canonSum, error) {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.i++
		s, err := p.sum(depth + 1)
		if err != nil {
			return s, err
		}
		p.space()
		p.i++ // ')', checked by CountdownExpr
		return s, nil
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == start {
		return canonSum{}, errors.New("want a number")
	}
	n := strings.TrimLeft(p.s[start:p.i], "0")
	if n == "" {
		n = "0"
	}
	return canonSum{pos: []canonProd{{num: []canonFactor{{n: n}}}}}, nil
}

// SolutionKey is the canonical form of the response's expression when it
// is a correct answer, else "" (core.SolutionKeyer: the diversity metric
// counts distinct correct solutions).
func (v CountdownVerifier) SolutionKey(p core.Problem, response string) string {
	if _, ok := v.Verify(p, response); !ok {
		return ""
	}
	expr, _ := ExtractAnswer(response)
	key, err := CountdownCanonical(expr)
	if err != nil {
		return ""
	}
	return key
}
