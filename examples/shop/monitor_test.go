package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// getCounter counts, with MONITOR, the GETs of one key a Redis server
// executes. MONITOR shows every command, so it is meant for a server of
// the test's own. A marker (an ECHO the counter sends itself) tells when
// every command before it has been seen: Redis runs commands one at a
// time and streams them to MONITOR in that order.
type getCounter struct {
	t       testing.TB
	keyArg  string // the key as the last argument of a MONITOR line
	conn    net.Conn
	echo    *redis.Client
	done    chan struct{}
	mu      sync.Mutex
	cond    *sync.Cond
	gets    int64
	marks   map[string]int64 // marker → GETs seen before it
	readErr error
	next    int
}

// go-redis sends command names in lower case.
var markerRe = regexp.MustCompile(`"(?i:echo)" "(keyheat-shop-mark-\d+)"$`)

// isGet reports whether a MONITOR line is a GET whose only argument is
// keyArg.
func isGet(line, keyArg string) bool {
	rest, ok := strings.CutSuffix(line, keyArg)
	return ok && len(rest) >= 5 && strings.EqualFold(rest[len(rest)-5:], `"get"`)
}

func countGets(t testing.TB, addr, key string) *getCounter {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	c := &getCounter{t: t, keyArg: ` "` + key + `"`, conn: conn, done: make(chan struct{}), marks: map[string]int64{},
		echo: redis.NewClient(&redis.Options{Addr: addr})}
	c.cond = sync.NewCond(&c.mu)
	go c.read()
	t.Cleanup(func() {
		_ = conn.Close()
		<-c.done
		_ = c.echo.Close()
	})
	c.sync() // the counter counts from here on
	return c
}

func (c *getCounter) read() {
	defer close(c.done)
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		if isGet(line, c.keyArg) {
			c.gets++
		} else if m := markerRe.FindStringSubmatch(line); m != nil {
			c.marks[m[1]] = c.gets
			c.cond.Broadcast()
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.readErr = fmt.Errorf("monitor stream ended: %v", sc.Err())
	c.cond.Broadcast()
	c.mu.Unlock()
}

// sync returns the GETs of the key the server executed before now.
func (c *getCounter) sync() int64 {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	marker := fmt.Sprintf("keyheat-shop-mark-%d", c.next)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(c.t, c.echo.Echo(ctx, marker).Err())
	stop := context.AfterFunc(ctx, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if n, ok := c.marks[marker]; ok {
			return n
		}
		if c.readErr != nil {
			c.t.Fatalf("counting GETs: %v", c.readErr)
		}
		if ctx.Err() != nil {
			c.t.Fatalf("MONITOR did not show the marker %s within %s (hang guard)", marker, testenv.HangGuard)
		}
		c.cond.Wait()
	}
}
