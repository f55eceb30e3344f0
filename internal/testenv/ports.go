package testenv

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

// handedOut are the ports FreePorts returned in this test binary: none is
// returned twice, so tests running in parallel never get the same port
// even when the kernel would hand a closed one out again.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePorts returns n distinct ports on 127.0.0.1 that nothing listened on
// when it looked, and that no earlier call in this test binary returned.
// Something else on the machine may take one before the test binds it;
// the kernel's ephemeral range it picks them from makes that rare.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	// Every listener stays open until all n are found, so the kernel
	// cannot give one port twice within a call.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	var out []int
	for len(out) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		held = append(held, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue
		}
		handedOut.ports[port] = true
		out = append(out, port)
	}
	return out
}

// FreePort returns one port as [FreePorts] does.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreeAddr returns "127.0.0.1:port" for a port as [FreePort] gives: an
// address for a server the test starts, or one where connections are
// refused.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// portFree reports whether nothing listens on port of 127.0.0.1 now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
