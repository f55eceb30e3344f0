package testenv

import (
	"net"
	"sync/atomic"
	"testing"
)

// CountingListener listens on a free port of 127.0.0.1, counts the
// connections made to it and closes each at once, answering nothing: a
// command pointed at it as its Kafka broker has touched Kafka if conns is
// not zero. It is closed when the test ends.
func CountingListener(t testing.TB) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	conns = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String(), conns
}
