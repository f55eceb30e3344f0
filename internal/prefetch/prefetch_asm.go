//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line starts loading the cache line holding addr into the cache.
//
//go:noescape
func Line(addr unsafe.Pointer)
