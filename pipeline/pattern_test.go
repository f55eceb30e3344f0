package pipeline

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPatterns(t *testing.T) {
	for _, tc := range []struct {
		pat  string
		kind patternKind
		yes  []string
		no   []string
	}{
		{"", matchAny, []string{"", "x"}, nil},
		{"*", matchAny, []string{"", "anything"}, nil},
		{"user:42", matchExact, []string{"user:42"}, []string{"user:4", "user:420", ""}},
		{"user:*", matchPrefix, []string{"user:", "user:1", "user:*"}, []string{"use", "xuser:1"}},
		{`a\*`, matchExact, []string{"a*"}, []string{"ab", "a"}},
		{`a\*b*`, matchPrefix, []string{"a*b", "a*bc"}, []string{"ab", "axbc"}},
		{"*:session", matchGlob, []string{":session", "u:1:session"}, []string{"u:1:sessions"}},
		{"u?er:*", matchGlob, []string{"user:1", "uxer:"}, []string{"uer:1", "usser:1"}},
		{"a*b*c", matchGlob, []string{"abc", "aXbYc", "abbbc", "acbc"}, []string{"ab", "acb", "abcx"}},
		{`a\?*`, matchPrefix, []string{"a?", "a?x"}, []string{"ab"}},
		{"**x", matchGlob, []string{"x", "yyx"}, []string{"xy"}},
	} {
		p, err := compilePattern(tc.pat)
		require.NoError(t, err, tc.pat)
		require.Equal(t, tc.kind, p.kind, "kind of %q", tc.pat)
		for _, s := range tc.yes {
			require.True(t, p.match(s), "%q should match %q", tc.pat, s)
		}
		for _, s := range tc.no {
			require.False(t, p.match(s), "%q should not match %q", tc.pat, s)
		}
	}
	_, err := compilePattern(`user:\`)
	require.ErrorContains(t, err, `lone \`)
}

// globRegexp is the obvious translation of a glob, to check globMatch
// against.
func globRegexp(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// FuzzGlob: globMatch agrees with the regular expression the glob stands
// for (on ASCII input, where regexp's . and globMatch's ? both mean one
// byte).
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"a*b?c", "axxbyc"}, {`\**`, "*x"}, {"*?*", ""}, {"a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, g, s string) {
		if !isASCII(g) || !isASCII(s) || strings.HasSuffix(strings.ReplaceAll(g, `\\`, ""), `\`) {
			return
		}
		require.Equal(t, globRegexp(g).MatchString(s), globMatch(g, s), "glob %q on %q", g, s)
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
