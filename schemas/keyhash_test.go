package schemas

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// TestKeyHash: the key_hash form, %016x of the xxh3 hash, for keys whose
// hash has leading zero digits too.
func TestKeyHash(t *testing.T) {
	zeros := 0
	for i := range 5000 {
		k := fmt.Sprintf("product:%d", i)
		want := fmt.Sprintf("%016x", xxh3.HashString(k))
		require.Equal(t, want, KeyHash(k))
		if want[0] == '0' {
			zeros++
		}
	}
	require.Positive(t, zeros, "some hash starts with a zero digit")
	require.Len(t, KeyHash(""), 16)
}
