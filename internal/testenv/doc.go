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
// It also holds what every package's tests need to run a command and wait
// on it, once:
//
//   - [Binary] builds a command once per test binary (with -race when the
//     tests run with it); [Start] runs it as a [Process] with its own
//     environment, arguments and standard input, collects stdout and
//     stderr line by line ([Lines]), waits for a line or the exit, and
//     signals, stops (SIGTERM) or kills (SIGKILL) it. A package that
//     builds binaries calls [RemoveBinaries] from its TestMain.
//   - [Eventually] waits on a condition, with [HangGuard] as a guard
//     against a hang only: a test never depends on how fast the machine
//     is. [EventuallyExplained] says why the condition last failed.
//   - [SyncBuffer] is a buffer a logger writes while the test reads it;
//     [FreePort], [FreePorts] and [FreeAddr] give ports nothing listens
//     on, none twice in one test binary; [CountingListener] counts the
//     connections a command makes to a broker address.
//
// The subpackage browser drives the dashboard in the headless browser
// [Chrome] names.
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
