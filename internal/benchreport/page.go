package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// results are a figure's results, all its runs together.
type results []result

// vals returns unit's values of the runs of the benchmark named name, in
// run order.
func (rs results) vals(name, unit string) []float64 {
	var out []float64
	for _, r := range rs {
		if r.name == name {
			if v, ok := r.vals[unit]; ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// has reports whether a benchmark named name gave results.
func (rs results) has(name string) bool {
	for _, r := range rs {
		if r.name == name {
			return true
		}
	}
	return false
}

// median of vs, NaN when empty.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cell formats vs with f: "—" when empty, the value when one, else the
// median with the range of the runs.
func cell(vs []float64, f func(float64) string) string {
	switch len(vs) {
	case 0:
		return "—"
	case 1:
		return f(vs[0])
	}
	if lo, hi := f(slices.Min(vs)), f(slices.Max(vs)); lo == hi {
		return lo
	}
	return fmt.Sprintf("%s (%s–%s)", f(median(vs)), f(slices.Min(vs)), f(slices.Max(vs)))
}

// ratio formats median(a) ÷ median(b) as "2.31×", "—" when either is
// missing.
func ratio(a, b []float64) string {
	r := median(a) / median(b)
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	return sig3(r) + "×"
}

// sig3 formats v with three significant digits, with thousands
// separators and no exponent: 312.5 → "312", 0.01234 → "0.0123",
// 243000 → "243,000".
func sig3(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if v == 0 {
		return "0"
	}
	neg := v < 0
	v = math.Abs(v)
	digits := int(math.Floor(math.Log10(v))) + 1
	decimals := max(0, 3-digits)
	if digits > 3 {
		scale := math.Pow(10, float64(digits-3))
		v = math.Round(v/scale) * scale
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// with returns a formatter appending unit to sig3.
func with(unit string) func(float64) string {
	return func(v float64) string { return sig3(v) + unit }
}

// table is a markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	line(t.head)
	b.WriteString("|" + strings.Repeat("---|", len(t.head)) + "\n")
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}
