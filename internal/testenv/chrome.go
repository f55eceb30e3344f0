package testenv

import (
	"os"
	"testing"
)

// EnvChrome names the headless browser (Chromium or Chrome) that tests of
// web pages drive, as printed by `scripts/chromium.sh up`.
const EnvChrome = "KEYHEAT_TEST_CHROME"

// Chrome returns the path of the browser named by KEYHEAT_TEST_CHROME.
// When the variable is unset it skips the test, or fails it under CI=true
// (as [Require] does); when the path is not an executable file the test fails,
// naming the script that installs the browser.
func Chrome(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvChrome)
	if path == "" {
		msg := EnvChrome + " is not set: this test drives a headless browser. Run the tests with `make test`, " +
			"or install it and load its path with `eval \"$(scripts/chromium.sh up)\"`"
		if InCI() {
			t.Fatalf("%s (CI=true, so not skipping)", msg)
		}
		t.Skip(msg)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s=%s is not an executable browser (install one with `eval \"$(scripts/chromium.sh up)\"`): %v",
			EnvChrome, path, err)
	}
	return path
}
