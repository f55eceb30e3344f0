// Package faststr compares short strings without a call into the runtime.
//
// The built-in string comparison calls runtime.memequal, which on a
// per-event path costs a few times more than the comparison itself, mostly
// in the registers saved around the call. These functions are small enough
// to be inlined at their call sites and read a few overlapping words inside
// both strings instead. hotring, sketch and pipeline use them on the path
// every event takes.
package faststr

import (
	"runtime"
	"unsafe"
)

// wordLoads is set where unaligned 8-byte loads are allowed.
const wordLoads = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" || runtime.GOARCH == "386" ||
	runtime.GOARCH == "ppc64le" || runtime.GOARCH == "s390x"

// Equal is a == b. For strings of 8 to 24 bytes, most keys, it compares
// two or three overlapping words; other lengths use ==.
func Equal(a, b string) bool {
	n := len(a)
	if !wordLoads || n != len(b) || n < 8 || n > 24 {
		return a == b
	}
	pa, pb := unsafe.Pointer(unsafe.StringData(a)), unsafe.Pointer(unsafe.StringData(b))
	x := *(*uint64)(pa) ^ *(*uint64)(pb)
	x |= *(*uint64)(unsafe.Add(pa, n-8)) ^ *(*uint64)(unsafe.Add(pb, n-8))
	if n > 16 {
		x |= *(*uint64)(unsafe.Add(pa, 8)) ^ *(*uint64)(unsafe.Add(pb, 8))
	}
	return x == 0
}

// EqualShort is a == b, with two overlapping 4-byte reads for 4 to 8
// bytes (apps, operations, namespaces such as "4:shop").
func EqualShort(a, b string) bool {
	n := len(a)
	if !wordLoads || n != len(b) || n < 4 || n > 8 {
		return a == b
	}
	pa, pb := unsafe.Pointer(unsafe.StringData(a)), unsafe.Pointer(unsafe.StringData(b))
	return (*(*uint32)(pa)^*(*uint32)(pb))|(*(*uint32)(unsafe.Add(pa, n-4))^*(*uint32)(unsafe.Add(pb, n-4))) == 0
}

// EqualTiny is a == b, for 1 to 3 bytes (operations such as GET) by the
// bytes at 0, n/2 and n−1, which are all of them.
func EqualTiny(a, b string) bool {
	n := len(a)
	if n != len(b) || n == 0 || n > 3 {
		return a == b
	}
	return a[0] == b[0] && a[n>>1] == b[n>>1] && a[n-1] == b[n-1]
}
