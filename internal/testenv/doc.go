// Package testenv gives tests the services they run against: the real Kafka
// broker, ClickHouse server and Redis server that scripts/services.sh
// starts, an in-process kfake cluster, and names that keep parallel tests
// apart.
//
// The real services are found through environment variables holding their
// addresses (KEYHEAT_TEST_KAFKA, KEYHEAT_TEST_CLICKHOUSE, KEYHEAT_TEST_REDIS),
// the way franz-go's own suite reads KGO_SEEDS. When one is unset a test
// needing it is skipped, except under CI=true, where it fails: CI always
// provides the services, so a missing address there is a broken setup,
// never a reason to pass quietly.
//
//	scripts/services.sh up
//	eval "$(scripts/services.sh env)"
//	go test ./...
//
// Tests that must stop a service, or need one configured otherwise,
// start a private instance: [PrivateClickHouse] (scripts/services.sh on
// ports of its own), [PrivateClickHouseTLS] (a clickhouse-server whose
// native port speaks only TLS, with a certificate from a CA the test made
// by [NewTestCerts], and one user with a password), [SecureKFake] (kfake
// with TLS and SASL).
//
// testenv owns how tests reach services and how they clean up after
// themselves (topics deleted, databases dropped, Redis keys under the
// test's prefix deleted, clients closed through t.Cleanup). It does not
// start the shared services (the script does) and it holds no schema of
// keyheat's: tests create their own tables and topics.
//
// This is a non-test package so that any package's tests can import it;
// nothing outside tests should.
package testenv
