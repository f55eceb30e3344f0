//go:build linux

package pipeline

import (
	"bytes"
	"runtime/debug"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestEventStringsNotRead is TestEventStringsNotKept for what a scribble
// cannot show: a string kept and read again later (a cache compared with
// the next event's, say) whose misreading changes no output. Each event's
// strings, the empty ones too, point into a page of their own among
// protPages, readable only while Process runs on it: a later read of any
// of them faults, and fails the test.
func TestEventStringsNotRead(t *testing.T) {
	const protPages = 16
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, protPages*page, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Munmap(mem) })

	for name, st := range sharedStreams() {
		for _, keyed := range []bool{true, false} {
			t.Run(name+"/keyed="+map[bool]string{true: "true", false: "false"}[keyed], func(t *testing.T) {
				// A fault in a protected page panics (on this goroutine) and
				// is recovered below, rather than crashing the test binary.
				defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
				src := testSource
				src.Keyed = keyed
				want := runOutputs(t, st.o, src, st.events, false)
				p := newPart(t, st.o, src, Start{Offset: st.events[0].off})
				var buf bytes.Buffer
				var out Output
				for i := range st.events {
					pg := mem[i%protPages*page : (i%protPages+1)*page]
					require.NoError(t, syscall.Mprotect(pg, syscall.PROT_READ|syscall.PROT_WRITE))
					n := 0
					alias := func(s string) string {
						n += copy(pg[n:], s)
						return unsafe.String(&pg[n-len(s)], len(s))
					}
					e := st.events[i].e
					e.Key, e.App, e.Op, e.Client, e.Node = alias(e.Key), alias(e.App), alias(e.Op), alias(e.Client), alias(e.Node)
					guard(t, i, func() { p.Process(&e, st.events[i].off, &out) })
					require.NoError(t, syscall.Mprotect(pg, syscall.PROT_NONE))
					guard(t, i, func() { writeOutputs(t, &buf, &out) })
				}
				guard(t, len(st.events), func() {
					p.End(&out)
					writeOutputs(t, &buf, &out)
				})
				require.Equal(t, string(want), buf.String())
			})
		}
	}
}

// guard runs f, failing the test if it faults: f read a string of an
// event before the i-th, whose page is no longer readable.
func guard(t *testing.T, i int, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("at event %d: %v: a string of an earlier event was read", i, r)
		}
	}()
	f()
}
