package prefetch

import (
	"testing"
	"unsafe"
)

// Line takes any address, valid or not, and changes nothing.
func TestLine(t *testing.T) {
	b := make([]byte, 256)
	b[100] = 7
	for i := range b {
		Line(unsafe.Pointer(&b[i]))
	}
	Line(nil)
	if b[100] != 7 {
		t.Fatal("a prefetch changed memory")
	}
}
