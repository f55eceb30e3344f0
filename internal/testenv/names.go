package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// maxNameTest caps the part of a name taken from the test's name. Kafka
// allows 249 characters in a topic name, but short names read better in
// broker logs and ClickHouse errors; the random suffix keeps them unique.
const maxNameTest = 40

// UniqueName returns prefix_<test name>_<random hex>, lower-cased, with
// every character outside [a-z0-9_] turned into '_'. The result is a valid
// Kafka topic, consumer group and ClickHouse database or table name
// (ClickHouse identifiers must not start with a digit: give a prefix that
// starts with a letter). Two calls never return the same name, so tests
// running in parallel, or a rerun against a service that kept an earlier
// run's leftovers, do not collide.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(sanitize(prefix))
	b.WriteByte('_')
	name := sanitize(t.Name())
	if len(name) > maxNameTest {
		name = name[:maxNameTest]
	}
	b.WriteString(name)
	b.WriteByte('_')
	var r [6]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+).
	b.WriteString(hex.EncodeToString(r[:]))
	return b.String()
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '_'
		}
	}, s)
}
