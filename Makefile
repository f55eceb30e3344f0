# keyheat: the one test command is `make test` (see README.md).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
# Recipes print what they do themselves; make need not echo them.
.SILENT:

GO ?= go
# How much each fuzz target runs in `make test`: an execution count, not a
# duration. With a duration, Go 1.26's fuzz coordinator can fail a target
# with a bare "context deadline exceeded" at the deadline under load
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
# `make fuzz FUZZTIME=2000000x` for a longer run.
FUZZTIME ?= 50000x
# Where test logs go; git-ignored.
OUT ?= .services/out

.PHONY: test check vet unit norace integration faults fuzz summary bench services-up services-down build

build:
	$(GO) build ./...

# test: what CI runs. Brings the real Kafka, ClickHouse and Redis up, runs
# every check against them, and brings them down again, also when a step
# fails.
test:
	rm -f $(OUT)/unit.log $(OUT)/norace.log
	trap 'scripts/services.sh down; $(MAKE) --no-print-directory summary' EXIT
	$(MAKE) --no-print-directory check
	scripts/services.sh up
	eval "$$(scripts/services.sh env)"
	eval "$$(scripts/pydeps.sh up)"
	eval "$$(scripts/chromium.sh up)"
	# Where tests leave what a person may want to look at (the dashboard's
	# screenshot from TestDashboardOfDemo).
	export KEYHEAT_TEST_OUT="$$PWD/$(OUT)"
	$(MAKE) --no-print-directory unit norace fuzz

# check: formatting and vet, no services needed.
check:
	unformatted=$$(gofmt -l $$(git ls-files '*.go'))
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# unit: every test under the race detector. With KEYHEAT_TEST_KAFKA,
# KEYHEAT_TEST_CLICKHOUSE and KEYHEAT_TEST_REDIS set (make test sets them,
# through `scripts/services.sh env`) the integration tests
# run against the real services; under CI=true they fail without them.
# go test's own limit of 10 minutes a package is raised: detect's tests
# under -race took 564 s on two loaded cores, then over 600.
unit:
	mkdir -p $(OUT)
	echo "go test -race ./... (full log: $(OUT)/unit.log)"
	if ! $(GO) test -race -count=1 -timeout 40m -v ./... > $(OUT)/unit.log 2>&1; then
	  grep -E '^(\s*--- FAIL|FAIL|panic:)' $(OUT)/unit.log || true
	  echo "---- assertions that failed ----"
	  grep -E -A8 '^\s+(Error Trace:|\S+_test\.go:[0-9]+: (timed out|gave up|.*(want|got|expected)))' $(OUT)/unit.log | grep -vE '^\s+time=' | head -n 200 || true
	  scripts/hung.sh $(OUT)/unit.log
	  echo "---- tail of $(OUT)/unit.log ----"; tail -n 150 $(OUT)/unit.log; exit 1
	fi
	grep -E '^(--- (PASS|SKIP)|ok |\?)' $(OUT)/unit.log | grep -v '^?' || true
	grep -cE '^\s*--- PASS' $(OUT)/unit.log | sed 's/^/tests and subtests passed: /'
	echo "against the real services (KEYHEAT_TEST_KAFKA, KEYHEAT_TEST_CLICKHOUSE, KEYHEAT_TEST_REDIS):"
	grep -E '^\s*--- (PASS|FAIL): (\S*/real_kafka|TestClickHouse\S*|TestChdb\S*|TestSplit\S*/(node|cluster)|TestRedis\S*) ' $(OUT)/unit.log || true
	if grep -qE '^\s*--- SKIP' $(OUT)/unit.log; then
	  echo "skipped:"; grep -E '^\s*--- SKIP' $(OUT)/unit.log
	  if [ "$${CI:-}" = true ]; then echo "tests skipped under CI=true"; exit 1; fi
	fi

# norace: the suite once more without the race detector, which allocates
# and slows everything down: allocation tests (built only without race) and
# the sketch accuracy tests at full size (10M events) run here.
norace:
	mkdir -p $(OUT)
	echo "go test ./... without -race (full log: $(OUT)/norace.log)"
	if ! $(GO) test -count=1 -timeout 40m -v ./... > $(OUT)/norace.log 2>&1; then
	  grep -E '^(\s*--- FAIL|FAIL|panic:)' $(OUT)/norace.log || true
	  echo "---- assertions that failed ----"
	  grep -E -A8 '^\s+(Error Trace:|\S+_test\.go:[0-9]+: (timed out|gave up|.*(want|got|expected)))' $(OUT)/norace.log | grep -vE '^\s+time=' | head -n 200 || true
	  scripts/hung.sh $(OUT)/norace.log
	  echo "---- tail of $(OUT)/norace.log ----"; tail -n 150 $(OUT)/norace.log; exit 1
	fi
	grep -E '^ok ' $(OUT)/norace.log
	grep -E 'accuracy_test.go:[0-9]+:' $(OUT)/norace.log || true
	if grep -qE '^\s*--- SKIP' $(OUT)/norace.log && [ "$${CI:-}" = true ]; then
	  grep -E '^\s*--- SKIP' $(OUT)/norace.log; echo "tests skipped under CI=true"; exit 1
	fi

# fuzz: every Fuzz target for FUZZTIME, seeded from its testdata corpus.
fuzz:
	mkdir -p $(OUT)
	for pkg in $$($(GO) list ./...); do
	  for target in $$($(GO) test -list '^Fuzz' "$$pkg" | grep '^Fuzz' || true); do
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -timeout 10m "$$pkg" > $(OUT)/fuzz.log 2>&1 || { tail -n 40 $(OUT)/fuzz.log; exit 1; }
	  done
	done

# integration: only the tests that need the real services.
integration:
	trap 'scripts/services.sh down' EXIT
	scripts/services.sh up
	eval "$$(scripts/services.sh env)"
	$(GO) test -race -count=1 -v ./internal/smoke/

# faults: the long form of the fault suite (internal/faults): a hundred
# detect kills, then ingest killed, the broker and ClickHouse stopped, the
# archive's disk filled and the CPU starved, each checked for lost and
# double-counted events. Its short form runs in `make test`. The suite
# starts a broker and a ClickHouse of its own (it stops those, never the
# shared ones) and mounts a tmpfs under its archive, which needs root.
# Services already running are left running afterwards.
faults:
	if ! scripts/services.sh status >/dev/null; then trap 'scripts/services.sh down' EXIT; fi
	scripts/services.sh up
	eval "$$(scripts/services.sh env)"
	eval "$$(scripts/pydeps.sh up)"
	mkdir -p $(OUT)
	export KEYHEAT_TEST_OUT="$$PWD/$(OUT)"
	KEYHEAT_FAULTS=long $(GO) test -count=1 -timeout 90m -v -run '^TestFaults$$' ./internal/faults/

# summary: one closing line over both test passes, for people and CI.
summary:
	logs=$$(ls $(OUT)/unit.log $(OUT)/norace.log 2>/dev/null || true)
	[ -n "$$logs" ] || exit 0
	passed=$$(cat $$logs | grep -cE '^\s*--- PASS' || true)
	failed=$$(cat $$logs | grep -cE '^\s*--- FAIL' || true)
	echo "tests: $$passed passed, $$failed failed"

# bench: the benchmark suite behind BENCHMARKS.md (under ten minutes on
# two busy cores). Rewrites BENCHMARKS.md: the machine, the date, each
# figure with the go test command that measured it. go test's own output
# goes to $(OUT)/bench.txt, which benchstat reads. The figures that use the
# real Kafka and ClickHouse need their addresses in the environment, as
# `make test` sets them (without them the page says what was not measured):
#   scripts/services.sh up; eval "$$(scripts/services.sh env)"; make bench
# BENCHFLAGS=-only=merge runs one figure (see internal/benchreport).
bench:
	mkdir -p $(OUT)
	$(GO) run ./internal/benchreport -out BENCHMARKS.md -raw $(OUT)/bench.txt $(BENCHFLAGS)

services-up:
	scripts/services.sh up

services-down:
	scripts/services.sh down
