package pipeline

import (
	"errors"
	"strings"
)

// pattern matches keys (or apps) by the syntax Rule documents. The common
// forms, an exact key and a prefix, compile to a string comparison, since
// a rule is checked against every event.
type pattern struct {
	kind patternKind
	lit  string // exact: the key; prefix: the prefix; glob: the pattern
}

type patternKind uint8

const (
	matchAny patternKind = iota
	matchExact
	matchPrefix
	matchGlob
)

// compilePattern compiles p; "" and "*" match everything.
func compilePattern(p string) (pattern, error) {
	if p == "" || p == "*" {
		return pattern{kind: matchAny}, nil
	}
	lit, meta, err := unescape(p)
	if err != nil {
		return pattern{}, err
	}
	switch {
	case meta == 0:
		return pattern{kind: matchExact, lit: lit}, nil
	case meta == 1 && strings.HasSuffix(p, "*") && !strings.HasSuffix(p, `\*`):
		return pattern{kind: matchPrefix, lit: lit[:len(lit)-1]}, nil
	}
	return pattern{kind: matchGlob, lit: p}, nil
}

// unescape returns p without its escapes, and how many unescaped * and ?
// it holds.
func unescape(p string) (lit string, meta int, err error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			if i+1 == len(p) {
				return "", 0, errors.New(`pattern ends in a lone \; write \\ for a backslash`)
			}
			i++
			b.WriteByte(p[i])
		case '*', '?':
			meta++
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), meta, nil
}

func (p *pattern) match(s string) bool {
	switch p.kind {
	case matchAny:
		return true
	case matchExact:
		return s == p.lit
	case matchPrefix:
		return strings.HasPrefix(s, p.lit)
	}
	return globMatch(p.lit, s)
}

// globMatch reports whether s matches the glob g: * is any run of bytes, ?
// one byte, \ quotes the next byte. It backtracks only to the last *, so
// it runs in O(len(g) × len(s)) at worst.
func globMatch(g, s string) bool {
	var gi, si int
	starG, starS := -1, 0
	for si < len(s) {
		if gi < len(g) {
			switch c := g[gi]; c {
			case '*':
				starG, starS = gi, si
				gi++
				continue
			case '?':
				gi++
				si++
				continue
			case '\\':
				if gi+1 < len(g) && g[gi+1] == s[si] {
					gi += 2
					si++
					continue
				}
			default:
				if c == s[si] {
					gi++
					si++
					continue
				}
			}
		}
		if starG < 0 {
			return false
		}
		// Let the last * swallow one more byte and retry from there.
		starS++
		gi, si = starG+1, starS
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}
