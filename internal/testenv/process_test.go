package testenv_test

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

const echoPkg = "./testdata/echo"

// fatalRecorder is a testing.TB whose Fatal ends only the goroutine that
// called it and records the message: for checking how a helper fails.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

func (r *fatalRecorder) Fatal(args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Helper() {}

// failure runs f with a fatalRecorder and returns what it failed with,
// "" when it returned.
func failure(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func TestBinaryBuiltOnce(t *testing.T) {
	a := testenv.Binary(t, echoPkg)
	b := testenv.Binary(t, echoPkg)
	require.Equal(t, a, b, "a second call returns the first build")
	require.Equal(t, "echo", filepath.Base(a), "the binary is named after its package")
}

func TestProcessArgsEnvStdinAndStop(t *testing.T) {
	p := testenv.Start(t, testenv.Binary(t, echoPkg), []string{"--one", "two"},
		testenv.Env("ECHO_VALUE=42"), testenv.Stdin(strings.NewReader("a\nb\n")))
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
	p := testenv.Start(t, testenv.Binary(t, echoPkg), nil)
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
	p := testenv.Start(t, testenv.Binary(t, echoPkg), nil, testenv.Env("ECHO_MODE=partial"))
	require.Equal(t, "no newline", p.WaitStdout(`^no newline$`))
	require.Equal(t, 0, p.WaitExit())
	require.NoError(t, p.Err())
	require.Equal(t, "no newline", p.Stdout.String())
}

func TestProcessCombinedOutputKeepsOrder(t *testing.T) {
	p := testenv.Start(t, testenv.Binary(t, echoPkg), nil, testenv.Env("ECHO_MODE=interleave"), testenv.CombinedOutput())
	require.Equal(t, 0, p.WaitExit())
	require.Same(t, p.Stdout, p.Stderr)
	require.Equal(t, "out 1\nerr 1\nout 2", p.Stdout.String())
}

func TestProcessExitBeforeLineFails(t *testing.T) {
	bin := testenv.Binary(t, echoPkg)
	msg := failure(t, func(tb testing.TB) {
		p := testenv.Start(tb, bin, nil, testenv.Env("ECHO_MODE=fail"))
		p.WaitStdout(`^never$`)
	})
	require.Contains(t, msg, `echo exited (exit status 7) before a line matching "^never$" on its stdout`)
}

func TestEventually(t *testing.T) {
	calls := 0
	testenv.Eventually(t, "the fifth call", func() bool {
		calls++
		require.LessOrEqual(t, calls, 5, "cond runs on the test's goroutine: require may stop the test")
		return calls == 5
	})
	require.Equal(t, 5, calls, "no call after cond held")
}

func TestEventuallyGivesUpSayingWhy(t *testing.T) {
	// A guard of a millisecond: the condition never holds, so whatever
	// the machine's speed the wait ends in the same failure.
	msg := failure(t, func(tb testing.TB) {
		n := 0
		testenv.EventuallyExplained(tb, "the impossible", time.Millisecond, func() (bool, string) {
			n++
			return false, fmt.Sprintf("call %d said no", n)
		})
	})
	require.Regexp(t, `^gave up after 1ms \(hang guard\) waiting for the impossible: call \d+ said no$`, msg)
}

func TestFreePorts(t *testing.T) {
	seen := map[int]bool{}
	for range 3 {
		for _, port := range testenv.FreePorts(t, 20) {
			require.False(t, seen[port], "port %d handed out twice", port)
			seen[port] = true
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			require.NoError(t, err, "a free port can be bound")
			require.NoError(t, ln.Close())
		}
	}
	addr := testenv.FreeAddr(t)
	_, err := net.DialTimeout("tcp", addr, time.Minute)
	require.Error(t, err, "nothing listens on a free address")
}

func TestSyncBufferConcurrentWriters(t *testing.T) {
	var b testenv.SyncBuffer
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
	addr, conns := testenv.CountingListener(t)
	require.Zero(t, conns.Load())
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_ = c.Close()
	testenv.Eventually(t, "the connection counted", func() bool { return conns.Load() == 1 })
}
