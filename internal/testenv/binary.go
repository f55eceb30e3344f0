package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// binaries are the commands this test binary built, by package.
var binaries struct {
	sync.Mutex
	dir   string
	built map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the command of package pkg, built once per
// test binary: the first call builds it with `go build` (with -race when
// the test binary runs with the race detector), later calls, from any
// test, return the same file. pkg is what go build takes: an import path
// ("github.com/keyheat/keyheat/cmd/detect") or a folder relative to the
// test's own ("."). A build error fails the test with the compiler's
// output.
//
// The binaries live in one temporary folder per test binary; a package
// that builds any calls [RemoveBinaries] from its TestMain.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	path, err := BuildBinary(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildBinary is [Binary] for a caller without a test at hand, such as a
// goroutine that builds while the test starts its services: it returns
// the build's error instead of failing a test.
func BuildBinary(pkg string) (string, error) {
	binaries.Lock()
	if binaries.built == nil {
		binaries.built = map[string]*build{}
	}
	b := binaries.built[pkg]
	if b == nil {
		b = &build{}
		binaries.built[pkg] = b
	}
	n := len(binaries.built)
	binaries.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(pkg, n) })
	return b.path, b.err
}

// goBuild builds pkg into a subfolder of the binaries' folder of its own
// (the n-th package), under the package's last path element: a command
// that names itself after os.Args[0] says what it says when run by hand.
func goBuild(pkg string, n int) (string, error) {
	binaries.Lock()
	if binaries.dir == "" {
		dir, err := os.MkdirTemp("", "keyheat-test-bin-")
		if err != nil {
			binaries.Unlock()
			return "", fmt.Errorf("a folder for the test binaries: %w", err)
		}
		binaries.dir = dir
	}
	dir := binaries.dir
	binaries.Unlock()
	base := filepath.Base(pkg)
	if abs, err := filepath.Abs(pkg); err == nil && strings.HasPrefix(pkg, ".") {
		base = filepath.Base(abs)
	}
	sub := filepath.Join(dir, strconv.Itoa(n))
	if err := os.Mkdir(sub, 0o755); err != nil {
		return "", fmt.Errorf("a folder for the binary of %s: %w", pkg, err)
	}
	out := filepath.Join(sub, base)
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	b, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// RemoveBinaries removes what [Binary] built. A TestMain calls it after
// m.Run; a later Binary call builds again.
func RemoveBinaries() error {
	binaries.Lock()
	defer binaries.Unlock()
	if binaries.dir == "" {
		return nil
	}
	err := os.RemoveAll(binaries.dir)
	binaries.dir, binaries.built = "", nil
	if err != nil {
		return fmt.Errorf("remove the test binaries: %w", err)
	}
	return nil
}

// Main is a TestMain for a package whose tests run binaries: it runs the
// tests, removes what [Binary] built, and when they passed fails the run
// if a goroutine is left behind (goleak).
func Main(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if err := RemoveBinaries(); err != nil {
			_, _ = fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(code)
	}))
}
