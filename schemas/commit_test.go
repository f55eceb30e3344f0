package schemas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommitMetaRoundTrip(t *testing.T) {
	for _, m := range []CommitMeta{
		{ResumeOffset: 1043, MaxTsMs: 1767225600123, NextWindowMs: 1767225599000, WindowMs: 1000},
		{ResumeOffset: 0, MaxTsMs: NoTimeMs, NextWindowMs: NoTimeMs, WindowMs: 1},
		{ResumeOffset: 7, MaxTsMs: -5, NextWindowMs: -1000, WindowMs: 250},
	} {
		s := m.String()
		got, err := ParseCommitMeta(s)
		require.NoError(t, err, s)
		require.Equal(t, m, got, s)
	}
	require.Equal(t, "kh1 r=1043 t=1767225600123 w=- l=1000",
		CommitMeta{ResumeOffset: 1043, MaxTsMs: 1767225600123, NextWindowMs: NoTimeMs, WindowMs: 1000}.String())
}

func TestParseCommitMetaRejects(t *testing.T) {
	for name, s := range map[string]string{
		"empty":              "",
		"other version":      "kh2 r=1 t=- w=- l=1000",
		"missing field":      "kh1 r=1 t=- l=1000",
		"extra field":        "kh1 r=1 t=- w=- l=1000 x=1",
		"reordered":          "kh1 t=- r=1 w=- l=1000",
		"double space":       "kh1  r=1 t=- w=- l=1000",
		"plus sign":          "kh1 r=+1 t=- w=- l=1000",
		"leading zero":       "kh1 r=01 t=- w=- l=1000",
		"negative zero":      "kh1 r=1 t=-0 w=- l=1000",
		"dash offset":        "kh1 r=- t=- w=- l=1000",
		"min int spelled":    "kh1 r=1 t=-9223372036854775808 w=- l=1000",
		"negative offset":    "kh1 r=-1 t=- w=- l=1000",
		"zero window":        "kh1 r=1 t=- w=- l=0",
		"overflow":           "kh1 r=9223372036854775808 t=- w=- l=1000",
		"not a number":       "kh1 r=1 t=x w=- l=1000",
		"trailing newline":   "kh1 r=1 t=- w=- l=1000\n",
		"uppercase prefix":   "KH1 r=1 t=- w=- l=1000",
		"empty value":        "kh1 r= t=- w=- l=1000",
		"window as dash":     "kh1 r=1 t=- w=- l=-",
		"spaces in a number": "kh1 r=1 t=1 2 w=- l=1000",
	} {
		_, err := ParseCommitMeta(s)
		require.ErrorIs(t, err, ErrCommitMeta, name)
	}
}

// FuzzParseCommitMeta: ParseCommitMeta never panics, and what it accepts
// is canonical: String gives back exactly the input.
func FuzzParseCommitMeta(f *testing.F) {
	f.Add("kh1 r=1043 t=1767225600123 w=1767225599000 l=1000")
	f.Add("kh1 r=0 t=- w=- l=1")
	f.Add("kh1 r=01 t=- w=- l=1000")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseCommitMeta(s)
		if err != nil {
			require.ErrorIs(t, err, ErrCommitMeta)
			require.Equal(t, CommitMeta{}, m)
			return
		}
		require.Equal(t, s, m.String())
		require.GreaterOrEqual(t, m.ResumeOffset, int64(0))
		require.GreaterOrEqual(t, m.WindowMs, int64(1))
	})
}
