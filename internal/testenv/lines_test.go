package testenv

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLinesSplitWrites(t *testing.T) {
	l := newLines()
	for _, w := range []string{"ab", "c\nde", "f\n", "\n", "tail"} {
		n, err := l.Write([]byte(w))
		require.NoError(t, err)
		require.Equal(t, len(w), n)
	}
	require.Equal(t, []string{"abc", "def", ""}, l.Match(regexp.MustCompile(``)), "a line counts once its newline came")
	require.Equal(t, "abc\ndef\n\ntail", l.String(), "String has the unfinished line too")
	require.Equal(t, -1, l.Index(regexp.MustCompile(`^tail$`)))
	l.close()
	require.Equal(t, 3, l.Index(regexp.MustCompile(`^tail$`)), "the stream's end finishes the last line")
	require.Equal(t, "abc\ndef\n\ntail", l.String())
}
