package testenv

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const echoPkg = "./testdata/echo"

func TestBinaryBuiltOnce(t *testing.T) {
	a := Binary(t, echoPkg)
	b := Binary(t, echoPkg)
	require.Equal(t, a, b, "a second call returns the first build")
	require.Equal(t, "echo", filepath.Base(a), "the binary is named after its package")
}

func TestProcessArgsEnvStdinAndStop(t *testing.T) {
	p := Start(t, Binary(t, echoPkg), []string{"--one", "two"},
		Env("ECHO_VALUE=42"), Stdin(strings.NewReader("a\nb\n")))
	require.Equal(t, `args ["--one" "two"]`, p.WaitStderr(`^args `))
	require.Equal(t, "env ECHO_VALUE=42", p.WaitStderr(`^env `))
	p.WaitStdout(`^stdin done$`)
	require.Equal(t, []string{"stdin: a", "stdin: b"}, p.Stdout.Match(regexp.MustCompile(`^stdin: `)))
	require.Equal(t, 1, p.Stdout.Index(regexp.MustCompile(`^stdin: b$`)))
	require.Equal(t, -1, p.Stdout.Index(regexp.MustCompile(`^stopping$`)), "stderr is not stdout")
	require.Equal(t, 3, p.Stop(), "the command's own exit code after SIGTERM")
	require.Len(t, p.Stderr.Match(regexp.MustCompile(`^stopping$`)), 1)
	require.Error(t, p.Err())
}

func TestProcessKill(t *testing.T) {
	p := Start(t, Binary(t, echoPkg), nil)
	p.WaitStderr(`^env `)
	p.Kill()
	require.Equal(t, -1, p.WaitExit(), "a process ended by a signal")
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is not closed after Kill")
	}
}

func TestProcessLastLineWithoutNewline(t *testing.T) {
	p := Start(t, Binary(t, echoPkg), nil, Env("ECHO_MODE=partial"))
	require.Equal(t, "no newline", p.WaitStdout(`^no newline$`))
	require.Equal(t, 0, p.WaitExit())
	require.NoError(t, p.Err())
	require.Equal(t, "no newline", p.Stdout.String())
}

func TestProcessCombinedOutputKeepsOrder(t *testing.T) {
	p := Start(t, Binary(t, echoPkg), nil, Env("ECHO_MODE=interleave"), CombinedOutput())
	require.Equal(t, 0, p.WaitExit())
	require.Same(t, p.Stdout, p.Stderr)
	require.Equal(t, "out 1\nerr 1\nout 2", p.Stdout.String())
}

func TestProcessExitBeforeLineFails(t *testing.T) {
	bin := Binary(t, echoPkg)
	msg := run(t, func(tb testing.TB) {
		p := Start(tb, bin, nil, Env("ECHO_MODE=fail"))
		p.WaitStdout(`^never$`)
	}).failed
	require.Contains(t, msg, `echo exited (exit status 7) before a line matching "^never$" on its stdout`)
}

func TestEventually(t *testing.T) {
	calls := 0
	Eventually(t, "the fifth call", func() bool {
		calls++
		require.LessOrEqual(t, calls, 5, "cond runs on the test's goroutine: require may stop the test")
		return calls == 5
	})
	require.Equal(t, 5, calls, "no call after cond held")
}

func TestEventuallyGivesUpSayingWhy(t *testing.T) {
	// A guard of a millisecond: the condition never holds, so whatever
	// the machine's speed the wait ends in the same failure.
	msg := run(t, func(tb testing.TB) {
		n := 0
		EventuallyExplained(tb, "the impossible", time.Millisecond, func() (bool, string) {
			n++
			return false, fmt.Sprintf("call %d said no", n)
		})
	}).failed
	require.Regexp(t, `^gave up after 1ms \(hang guard\) waiting for the impossible: call \d+ said no$`, msg)
}

func TestFreePorts(t *testing.T) {
	seen := map[int]bool{}
	for range 3 {
		for _, port := range FreePorts(t, 20) {
			require.False(t, seen[port], "port %d handed out twice", port)
			seen[port] = true
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			require.NoError(t, err, "a free port can be bound")
			require.NoError(t, ln.Close())
		}
	}
	addr := FreeAddr(t)
	_, err := net.DialTimeout("tcp", addr, time.Minute)
	require.Error(t, err, "nothing listens on a free address")
}

func TestSyncBufferConcurrentWriters(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "writer %d\n", i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 800, strings.Count(b.String(), "\n"))
	for i := range 8 {
		require.Equal(t, 100, strings.Count(b.String(), fmt.Sprintf("writer %d\n", i)))
	}
}

func TestCountingListener(t *testing.T) {
	addr, conns := CountingListener(t)
	require.Zero(t, conns.Load())
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_ = c.Close()
	Eventually(t, "the connection counted", func() bool { return conns.Load() == 1 })
}
