//go:build !race

package faults

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keyheat/keyheat/internal/testenv"
)

// The harness: the commands built once, each run as a supervised process
// that the suite kills and that is started again whenever it exits, the
// way an orchestrator restarts a crashed service. testenv's Process is
// for a process a test starts once; this supervisor restarts, logs to
// files and scrapes metrics, which that harness does not.

// buildBinaries builds cmd/ingest and cmd/detect (once per test binary)
// and returns their paths.
func buildBinaries() (ingest, detect string, err error) {
	if ingest, err = testenv.BuildBinary("github.com/keyheat/keyheat/cmd/ingest"); err != nil {
		return "", "", err
	}
	detect, err = testenv.BuildBinary("github.com/keyheat/keyheat/cmd/detect")
	return ingest, detect, err
}

// exitRecord is a process's exit the suite did not cause.
type exitRecord struct {
	run      int
	code     int
	at       time.Time
	errLine  string // the last level=ERROR line of its log, "" when none
	logPath  string
	lastLine string
}

// run is one start of a supervised process.
type run struct {
	n       int
	cmd     *exec.Cmd
	metrics string // host:port of its /metrics
	log     string // its stdout and stderr
	started time.Time
	done    chan struct{}
	err     error
	killed  bool // by the suite; guarded by service.mu
}

// service is a command kept running: started again at once after the
// suite kills it, and a second after it exits by itself (recorded in
// exits, with the error its log gave).
type service struct {
	t      *testing.T
	name   string
	bin    string
	args   func(metricsAddr string) []string
	logDir string

	mu       sync.Mutex
	cur      *run
	runs     int
	exits    []exitRecord
	stopping bool
	changed  chan struct{} // closed and replaced when cur changes

	stopc chan struct{}
	done  chan struct{}
}

// startService starts name and keeps it running until the test ends or
// stop is called.
func startService(t *testing.T, name, bin, logDir string, args func(metricsAddr string) []string) *service {
	s := &service{t: t, name: name, bin: bin, args: args, logDir: logDir, changed: make(chan struct{}),
		stopc: make(chan struct{}), done: make(chan struct{})}
	first := make(chan error, 1)
	go s.supervise(first)
	if err := <-first; err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { s.stop(testenv.HangGuard) })
	return s
}

func (s *service) supervise(first chan<- error) {
	defer close(s.done)
	for {
		r, err := s.launch()
		if first != nil {
			first <- err
			first = nil
		}
		if err != nil {
			s.t.Errorf("start %s: %v", s.name, err)
			return
		}
		<-r.done
		s.mu.Lock()
		stopping, killed := s.stopping, r.killed
		if !killed && !stopping {
			s.exits = append(s.exits, describeExit(r))
		}
		s.mu.Unlock()
		if stopping {
			return
		}
		if !killed {
			// An exit by itself: start again after a moment, as a
			// supervisor with a restart delay does.
			select {
			case <-s.stopc:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func (s *service) launch() (*run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, fmt.Errorf("stopping")
	}
	s.runs++
	r := &run{n: s.runs, metrics: freeAddr(), done: make(chan struct{}),
		log: filepath.Join(s.logDir, fmt.Sprintf("%s-%03d.log", s.name, s.runs))}
	f, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(s.bin, s.args(r.metrics)...)
	r.cmd.Env = processEnv()
	r.cmd.Stdout, r.cmd.Stderr = f, f
	// Gone with the suite, however it ends: an interrupted run leaves no
	// process writing to a broker that is gone too.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	r.started = time.Now()
	go func() {
		r.err = r.cmd.Wait()
		_ = f.Close()
		close(r.done)
	}()
	s.cur = r
	close(s.changed)
	s.changed = make(chan struct{})
	return r, nil
}

// processEnv is the suite's environment without its KEYHEAT_ variables:
// the commands take their whole configuration from their flags, and
// refuse a KEYHEAT_ variable naming no key of theirs (KEYHEAT_FAULTS).
func processEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KEYHEAT_") {
			env = append(env, kv)
		}
	}
	return env
}

// describeExit reads what r's log says about its exit.
func describeExit(r *run) exitRecord {
	e := exitRecord{run: r.n, code: exitCode(r.err), at: time.Now(), logPath: r.log}
	f, err := os.Open(r.log)
	if err != nil {
		return e
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "level=ERROR") {
			e.errLine = line
		}
		if strings.TrimSpace(line) != "" {
			e.lastLine = line
		}
	}
	return e
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// current returns the running (or last) start and a channel closed when
// another one replaces it.
func (s *service) current() (*run, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed
}

// kill sends SIGKILL to the running process (a crash: nothing flushed or
// committed) and waits until it is gone; the supervisor starts it again
// at once. It returns when the kill happened.
// A process that already exited is waited for to be started again first.
func (s *service) kill() time.Time {
	for {
		s.mu.Lock()
		r, changed := s.cur, s.changed
		select {
		case <-r.done:
			s.mu.Unlock()
			<-changed
			continue
		default:
		}
		r.killed = true
		s.mu.Unlock()
		at := time.Now()
		_ = r.cmd.Process.Kill()
		<-r.done
		return at
	}
}

// stop sends SIGTERM to the running process, stops supervising and
// returns its exit code; -1 when it had already exited.
func (s *service) stop(timeout time.Duration) int {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		<-s.done
		return -1
	}
	s.stopping = true
	close(s.stopc)
	r := s.cur
	s.mu.Unlock()
	code := -1
	if r != nil {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.done:
				code = exitCode(r.err)
			case <-time.After(timeout):
				s.t.Errorf("%s did not exit within %s of SIGTERM (log %s); killing it", s.name, timeout, r.log)
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		}
	}
	<-s.done
	return code
}

// unexpectedExits returns the exits the suite did not cause, so far.
func (s *service) unexpectedExits() []exitRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]exitRecord(nil), s.exits...)
}

// progress is a point in a service's work: which start, and its counter.
type progress struct {
	run   int
	value float64
}

// counter returns the running start's counter metric (summed over its
// labels), or -1 when it cannot be read (not listening yet, exited).
func (s *service) counter(metric string) progress {
	r, _ := s.current()
	return progress{run: r.n, value: scrapeSum(r.metrics, metric)}
}

// waitProgress waits until the service processes again after from: a
// later start whose metric is positive, or the same start's metric above
// from's value. It returns when that was seen. The wait has no deadline
// of its own beyond a hang guard: recovery time is measured, not judged.
func (s *service) waitProgress(t *testing.T, metric string, from progress, what string) time.Time {
	t.Helper()
	guard := time.Now().Add(10 * time.Minute)
	from.value = max(from.value, 0) // -1: its metrics were not readable
	exits := len(s.unexpectedExits())
	for {
		p := s.counter(metric)
		if (p.run != from.run && p.value > 0) || (p.run == from.run && p.value > from.value) {
			return time.Now()
		}
		// A process that keeps failing at once will not recover by
		// waiting: say why it fails.
		if e := s.unexpectedExits(); len(e) > exits+10 {
			last := e[len(e)-1]
			t.Fatalf("%s exited %d times by itself while the suite waited for it to process again after %s; the last exit (code %d, log %s): %s",
				s.name, len(e)-exits, what, last.code, last.logPath, last.lastLine)
		}
		if time.Now().After(guard) {
			r, _ := s.current()
			t.Fatalf("gave up after 10 minutes waiting for %s to process again after %s (start %d, %s %v; log %s)",
				s.name, what, p.run, metric, p.value, r.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrapeClient keeps no connection open between scrapes: the processes
// it scrapes come and go.
var scrapeClient = http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// scrapeSum returns the sum of every sample of metric on the /metrics of
// addr, or -1 when the page cannot be read.
func scrapeSum(addr, metric string) float64 {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics") //nolint:noctx // local, with a timeout
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	if sc.Err() != nil {
		return -1 // a page cut short (the timeout) sums only some samples
	}
	return sum
}

// freeAddr returns a 127.0.0.1 address nothing listens on now.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:1"
	}
	defer ln.Close()
	return ln.Addr().String()
}
