package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Environment variables naming the real services, as printed by
// `scripts/services.sh env`.
const (
	// EnvKafka holds a comma-separated list of Kafka seed brokers
	// (host:port), e.g. 127.0.0.1:19092.
	EnvKafka = "KEYHEAT_TEST_KAFKA"
	// EnvClickHouse holds the host:port of a ClickHouse server's native
	// (TCP) protocol, e.g. 127.0.0.1:19000.
	EnvClickHouse = "KEYHEAT_TEST_CLICKHOUSE"
)

// KafkaSeeds returns the seed brokers of the real Kafka cluster named by
// KEYHEAT_TEST_KAFKA. When the variable is unset it skips the test, or
// fails it under CI=true (see [Require]).
func KafkaSeeds(t testing.TB) []string {
	t.Helper()
	var seeds []string
	for s := range strings.SplitSeq(Require(t, EnvKafka), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		t.Fatalf("%s=%q names no broker; want host:port[,host:port…]", EnvKafka, os.Getenv(EnvKafka))
	}
	return seeds
}

// ClickHouseAddr returns the host:port of the real ClickHouse server's
// native protocol named by KEYHEAT_TEST_CLICKHOUSE. When the variable is
// unset it skips the test, or fails it under CI=true (see [Require]).
func ClickHouseAddr(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(Require(t, EnvClickHouse))
}

// Require returns the value of the environment variable name. When it is
// empty, the test is skipped with a message saying how to start the
// services, unless the CI environment variable is true: there the services
// are always started, so the test fails instead of passing without having
// run.
func Require(t testing.TB, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := name + " is not set: this test needs a real service. Run the tests with `make test`, " +
		"or start the services with `scripts/services.sh up` and load their addresses with " +
		"`eval \"$(scripts/services.sh env)\"`"
	if InCI() {
		t.Fatalf("%s (CI=true, so not skipping)", msg)
	}
	t.Skip(msg)
	return ""
}

// InCI reports whether the CI environment variable is set to a true value
// ("true", "1", …), as CI systems do.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}
