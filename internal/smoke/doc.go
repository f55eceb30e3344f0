// Package smoke holds integration smoke tests that prove the test services
// work end to end with the clients keyheat uses: franz-go against kfake and
// the real Kafka broker, clickhouse-go over the native protocol against the
// real ClickHouse server.
//
// They check the services and clients, not keyheat's own code; when they
// fail, suspect scripts/services.sh, the machine or a client upgrade before
// the pipeline. Run them with the services up:
//
//	scripts/services.sh up
//	eval "$(scripts/services.sh env)"
//	CI=true go test -race -v ./internal/smoke
//
// The package has only tests; this file exists to say so.
package smoke
