package sketch

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

var sinkU uint64

func BenchmarkTmpXXHash(b *testing.B) {
	keys := benchKeys(1 << 16)
	i := 0
	for b.Loop() {
		sinkU += xxhash.Sum64(keys[i&(len(keys)-1)])
		i++
	}
}
func BenchmarkTmpLoop(b *testing.B) {
	keys := benchKeys(1 << 16)
	i := 0
	for b.Loop() {
		sinkU += uint64(len(keys[i&(len(keys)-1)]))
		i++
	}
}
