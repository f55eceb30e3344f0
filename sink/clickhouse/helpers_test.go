package clickhouse

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// testDB returns a connection to the real test server and a fresh
// database on it, dropped when the test ends.
func testDB(t *testing.T) (driver.Conn, string) {
	t.Helper()
	conn := testenv.ClickHouseConn(t)
	return conn, testenv.ClickHouseDatabase(t, conn)
}

// testOptions are options for the real test server and database db, with
// batches small enough that a test's items span several.
func testOptions(addr, db string) Options {
	o := DefaultOptions()
	o.Addr = []string{addr}
	o.Database = db
	o.BatchRows = 500
	o.MaxBufferedRows = 5_000
	o.FlushInterval = 20 * time.Millisecond
	o.RetryMin = 20 * time.Millisecond
	o.RetryMax = 500 * time.Millisecond
	return o
}

// acks records what the writer acknowledged, per item id.
type acks struct {
	mu   sync.Mutex
	ok   map[string]int
	errs map[string]error
	n    int
	cond *sync.Cond
}

func newAcks() *acks {
	a := &acks{ok: map[string]int{}, errs: map[string]error{}}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *acks) fn(id string) AckFunc {
	return func(err error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			a.errs[id] = err
		} else {
			a.ok[id]++
		}
		a.n++
		a.cond.Broadcast()
	}
}

// wait blocks until n acks arrived, failing the test after
// testenv.HangGuard: acks come in milliseconds to seconds (after an
// outage, once the server is back), so the bound only stops a hang.
func (a *acks) wait(t *testing.T, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		a.mu.Lock()
		for a.n < n {
			a.cond.Wait()
		}
		a.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testenv.HangGuard):
		a.mu.Lock()
		got := a.n
		a.n = n // release the waiter so it does not leak
		a.cond.Broadcast()
		a.mu.Unlock()
		<-done
		t.Fatalf("%d of %d acks after %s (hang guard)", got, n, testenv.HangGuard)
	}
}

// writeAll writes f's reports and hot-key events (a label tells two
// writes of one fixture apart in the acks), returning how many items it
// wrote.
func writeAll(ctx context.Context, t *testing.T, w *Writer, f fixture, a *acks, label string) int {
	t.Helper()
	for i, r := range f.reports {
		require.NoError(t, w.WriteReport(ctx, r, a.fn(fmt.Sprintf("%s/r%d/%s", label, i, r.ID))))
	}
	for _, h := range f.hot {
		require.NoError(t, w.WriteHotKey(ctx, h, a.fn(label+"/h/"+h.ID)))
	}
	return len(f.reports) + len(f.hot)
}

// counts returns, per table of db, the rows under FINAL and without it.
func counts(ctx context.Context, t *testing.T, conn driver.Conn, db string) (final, raw map[string]int) {
	t.Helper()
	final, raw = map[string]int{}, map[string]int{}
	for _, tb := range tables() {
		var n uint64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+tb.name+" FINAL").Scan(&n), tb.name)
		final[tb.name] = int(n)
		require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+tb.name).Scan(&n), tb.name)
		raw[tb.name] = int(n)
	}
	return final, raw
}

// privateServer is a ClickHouse server of the test's own, on free ports
// and a temporary data folder, which the test may kill and restart
// without disturbing other tests that share the suite's server.
type privateServer struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
	exit chan struct{}
}

// startPrivateServer starts clickhouse-server, which scripts/services.sh
// installs: a test run that has the shared server (KEYHEAT_TEST_CLICKHOUSE
// set) has the binary too.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	testenv.ClickHouseAddr(t) // skip (or fail under CI) as the other ClickHouse tests do
	bin, err := exec.LookPath("clickhouse-server")
	require.NoError(t, err, "clickhouse-server not on PATH: run scripts/services.sh up first")
	dir := t.TempDir()
	ports := testenv.FreePorts(t, 3)
	for _, d := range []string{"data", "tmp", "user_files", "format_schemas"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	s := &privateServer{t: t, bin: bin, dir: dir, port: ports[0], args: []string{
		"--config-file=/etc/clickhouse-server/config.xml", "--",
		"--path=" + filepath.Join(dir, "data") + "/",
		"--tmp_path=" + filepath.Join(dir, "tmp") + "/",
		"--user_files_path=" + filepath.Join(dir, "user_files") + "/",
		"--format_schema_path=" + filepath.Join(dir, "format_schemas") + "/",
		"--listen_host=127.0.0.1",
		fmt.Sprintf("--tcp_port=%d", ports[0]),
		fmt.Sprintf("--http_port=%d", ports[1]),
		fmt.Sprintf("--interserver_http_port=%d", ports[2]),
		"--logger.log=" + filepath.Join(dir, "server.log"),
		"--logger.errorlog=" + filepath.Join(dir, "server.err.log"),
	}}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *privateServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start runs the server and waits until its native port accepts.
func (s *privateServer) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	out, err := os.Create(filepath.Join(s.dir, "stdout.log"))
	require.NoError(s.t, err)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(s.t, cmd.Start())
	s.cmd, s.exit = cmd, make(chan struct{})
	go func(exit chan struct{}) {
		_ = cmd.Wait() // killed on purpose: its status says nothing
		_ = out.Close()
		close(exit)
	}(s.exit)
	deadline := time.Now().Add(testenv.HangGuard)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-s.exit:
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.err.log"))
			s.t.Fatalf("private clickhouse-server exited during start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("private clickhouse-server not listening on %s after %s (hang guard)", s.addr(), testenv.HangGuard)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *privateServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exit
	s.cmd = nil
}
