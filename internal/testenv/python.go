package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// EnvPython names the Python interpreter that has the independent readers
// some tests check keyheat's output with (chdb, duckdb, pyarrow), as
// printed by `scripts/pydeps.sh up`.
const EnvPython = "KEYHEAT_TEST_PYTHON"

// Python returns the interpreter named by KEYHEAT_TEST_PYTHON after
// checking that it imports every module in modules. When the variable is
// unset it skips the test, or fails it under CI=true (see [Require]); when
// the interpreter lacks a module the test fails, naming the script that
// installs it.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	py := Require(t, EnvPython)
	if len(modules) > 0 {
		out, err := exec.Command(py, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput()
		if err != nil {
			t.Fatalf("%s=%s cannot import %s: %v: %s (install them with `eval \"$(scripts/pydeps.sh up)\"`)",
				EnvPython, py, strings.Join(modules, ", "), err, out)
		}
	}
	return py
}
