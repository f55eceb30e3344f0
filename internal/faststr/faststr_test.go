package faststr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The inlined comparisons agree with == at every length, whichever byte
// differs, whatever the strings' alignment.
func TestAgreesWithEquality(t *testing.T) {
	buf := []byte(strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 3))
	for name, same := range map[string]func(a, b string) bool{
		"Equal": Equal, "EqualShort": EqualShort, "EqualTiny": EqualTiny,
	} {
		for n := range 40 {
			for off := range 3 {
				a := string(buf[off : off+n])
				require.True(t, same(a, strings.Clone(a)), "%s: len %d", name, n)
				for i := range n {
					b := []byte(a)
					b[i] ^= 0x40
					require.False(t, same(a, string(b)), "%s: len %d, byte %d differs", name, n, i)
				}
				if n > 0 {
					require.False(t, same(a, a[1:]), "%s: len %d against %d", name, n, n-1)
				}
			}
		}
	}
}
