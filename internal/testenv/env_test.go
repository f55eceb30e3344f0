package testenv

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// recordTB stands in for the testing.TB a helper receives, so the skip and
// fail paths can be observed without skipping or failing this test. Like
// the real Skip and Fatal it stops the calling goroutine.
type recordTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recordTB on its own goroutine, since Skip and Fatalf
// end the goroutine they run on.
func run(t *testing.T, f func(testing.TB)) *recordTB {
	r := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		name, value, ci    string
		wantSkip, wantFail bool
	}{
		{name: "set", value: "127.0.0.1:1", ci: "true"},
		{name: "unset_locally_skips", value: "", ci: "", wantSkip: true},
		{name: "unset_ci_false_skips", value: "", ci: "false", wantSkip: true},
		{name: "unset_in_ci_fails", value: "", ci: "true", wantFail: true},
		{name: "unset_in_ci_1_fails", value: "", ci: "1", wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvKafka, tc.value)
			t.Setenv("CI", tc.ci)
			var got []string
			r := run(t, func(tb testing.TB) { got = KafkaSeeds(tb) })
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped=%q failed=%q; want skip=%v fail=%v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			msg := r.skipped + r.failed
			if msg != "" {
				for _, want := range []string{EnvKafka, "make test", "scripts/services.sh up"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not mention %q", msg, want)
					}
				}
				return
			}
			if len(got) != 1 || got[0] != tc.value {
				t.Fatalf("KafkaSeeds = %q, want [%q]", got, tc.value)
			}
		})
	}
}

func TestKafkaSeedsSplitsList(t *testing.T) {
	t.Setenv(EnvKafka, " a:1, b:2 ,,")
	got := KafkaSeeds(t)
	if strings.Join(got, "|") != "a:1|b:2" {
		t.Fatalf("KafkaSeeds = %q, want [a:1 b:2]", got)
	}
}

func TestUniqueName(t *testing.T) {
	// Valid as a ClickHouse identifier and a Kafka topic name alike.
	valid := regexp.MustCompile(`^[a-z_][a-z0-9_]{0,200}$`)
	seen := map[string]bool{}
	for range 100 {
		n := UniqueName(t, "Key-Heat.db")
		if !valid.MatchString(n) {
			t.Fatalf("UniqueName = %q, not a valid identifier", n)
		}
		if !strings.HasPrefix(n, "key_heat_db_testuniquename_") {
			t.Fatalf("UniqueName = %q, want the prefix and test name first", n)
		}
		if seen[n] {
			t.Fatalf("UniqueName returned %q twice", n)
		}
		seen[n] = true
	}
}
