#!/usr/bin/env bash
# services.sh starts and stops the real services keyheat's integration tests
# talk to: a ClickHouse server (Debian's package), a single-node KRaft
# Apache Kafka broker (jars from Maven Central) and a Redis server (Debian's
# package). All listen on 127.0.0.1 only, on ports of their own, with state
# in a run folder, so they never touch a system-wide instance.
#
#   scripts/services.sh up      install what is missing, start all three, wait
#                               until they answer, print the env (idempotent)
#   scripts/services.sh env     print the export lines the tests read, and
#                               those that point ingest (kafka.brokers) and
#                               detect (clickhouse.addr) at these services
#   scripts/services.sh status  say what runs (exit 3 when a service is stopped)
#   scripts/services.sh down    stop all three (TERM, then KILL) and delete
#                               their data
#
#   kafka-up | kafka-stop | kafka-start | kafka-down: the broker alone, for
#   tests that stop it mid-run (internal/testenv.PrivateKafka): kafka-stop
#   keeps its data and kafka-start brings it back with it.
#   clickhouse-up | clickhouse-stop | clickhouse-start | clickhouse-down: the
#   same for the ClickHouse server alone (internal/testenv.PrivateClickHouse);
#   clickhouse-up starts from an empty data folder.
#   redis-up | redis-stop | redis-start | redis-down: the same for the Redis
#   server alone. It keeps nothing on disk (no RDB, no AOF): redis-stop
#   loses its keys, and redis-start brings back an empty server on the same
#   port. With KEYHEAT_SERVICES_REDIS_CLUSTER=1 it runs in cluster mode as
#   a one-node cluster holding all 16384 slots, which rejects cross-slot
#   commands as a real cluster does (internal/testenv.PrivateRedisCluster).
#
#   eval "$(scripts/services.sh up)"   # progress goes to stderr, env to stdout
#
# Environment:
#   KEYHEAT_SERVICES_DIR  run folder (pids, data, logs); default <repo>/.services
#   KEYHEAT_CACHE         download cache, outside the repo; default ~/.cache/keyheat
#   KEYHEAT_SERVICES_KAFKA_HEAP    broker -Xmx; default 1g
#   KEYHEAT_SERVICES_REDIS_CLUSTER 1 starts Redis as a one-node cluster
#   KEYHEAT_SERVICES_PORT_OFFSET  added to every port (ClickHouse 19000,
#                         18123, 19009; Kafka 19092, 19093; Redis 16379);
#                         default 0
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${KEYHEAT_SERVICES_DIR:-$REPO/.services}
CACHE=${KEYHEAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keyheat}
POM=$REPO/scripts/kafka/pom.xml

HOST=127.0.0.1
# Ports. KEYHEAT_SERVICES_PORT_OFFSET moves them all, so a second checkout
# (or a machine where these are taken) can run its own pair.
OFF=${KEYHEAT_SERVICES_PORT_OFFSET:-0}
CH_TCP_PORT=$((19000 + OFF))
CH_HTTP_PORT=$((18123 + OFF))
CH_INTERSERVER_PORT=$((19009 + OFF))
KAFKA_PORT=$((19092 + OFF))
KAFKA_CONTROLLER_PORT=$((19093 + OFF))
REDIS_PORT=$((16379 + OFF))

CH_DIR=$RUN/clickhouse
KAFKA_DIR=$RUN/kafka
REDIS_DIR=$RUN/redis
LOG_DIR=$RUN/logs

# Seconds to wait for a service to answer, and for it to exit after TERM.
START_TIMEOUT=${KEYHEAT_SERVICES_START_TIMEOUT:-180}
STOP_TIMEOUT=30

KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
KAFKA_LIB=$CACHE/kafka-$KAFKA_VERSION/lib

log() { printf 'services: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# as_root runs a command with root rights: directly when we are root, through
# sudo otherwise (apt-get needs it).
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root for: $* (run as root or install sudo)"
	fi
}

pid_of() { # pid_of NAME: pid from the run folder, empty when not running
	local f=$RUN/$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(<"$f")
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		echo "$pid"
	fi
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

tail_log() { # tail_log FILE...: show what a service said before it failed
	local f
	for f in "$@"; do
		[[ -s $f ]] || continue
		log "---- last lines of $f ----"
		tail -n 40 "$f" >&2
	done
}

# print_env prints what the tests read (KEYHEAT_TEST_*) and what points
# keyheat's own commands at these services (the config keys kafka.brokers
# and clickhouse.addr), so `eval "$(scripts/services.sh env)"` serves both.
# Redis has no KEYHEAT_REDIS_ADDR: keyheat's commands have no Redis config
# key, and they reject a KEYHEAT_ variable that names none.
print_env() {
	echo "export KEYHEAT_TEST_KAFKA=$HOST:$KAFKA_PORT"
	echo "export KEYHEAT_TEST_CLICKHOUSE=$HOST:$CH_TCP_PORT"
	echo "export KEYHEAT_TEST_REDIS=$HOST:$REDIS_PORT"
	echo "export KEYHEAT_KAFKA_BROKERS=$HOST:$KAFKA_PORT"
	echo "export KEYHEAT_CLICKHOUSE_ADDR=$HOST:$CH_TCP_PORT"
}

# ---------------------------------------------------------------- ClickHouse

ch_install() {
	if command -v clickhouse-server >/dev/null && command -v clickhouse-client >/dev/null; then
		return
	fi
	local t0
	t0=$(now)
	log "clickhouse: installing clickhouse-server clickhouse-client with apt-get"
	mkdir -p "$LOG_DIR"
	if ! as_root env DEBIAN_FRONTEND=noninteractive sh -c \
		'apt-get update -q && apt-get install -y -q clickhouse-server clickhouse-client' \
		>"$LOG_DIR/apt.log" 2>&1; then
		log "clickhouse: apt-get failed"
		tail_log "$LOG_DIR/apt.log"
		exit 1
	fi
	log "clickhouse: installed in $(since "$t0")"
}

ch_ready() {
	clickhouse-client --host "$HOST" --port "$CH_TCP_PORT" -q 'SELECT 1' >/dev/null 2>&1
}

ch_up() {
	if [[ -n $(pid_of clickhouse) ]] && ch_ready; then
		log "clickhouse: already running (pid $(pid_of clickhouse))"
		return
	fi
	port_open "$CH_TCP_PORT" && die "clickhouse: port $CH_TCP_PORT is taken by a process this script did not start"
	ch_install

	local t0 pid
	t0=$(now)
	mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas} "$LOG_DIR"
	: >"$LOG_DIR/clickhouse.log"
	: >"$LOG_DIR/clickhouse.err.log"
	: >"$LOG_DIR/clickhouse.stdout.log"
	# The "-- --key=value" arguments override top-level keys of the packaged
	# config.xml, so the system config is reused but no path or port of the
	# system-wide instance is. listen_host replaces the default (localhost
	# on IPv4 and IPv6) with one IPv4 loopback address.
	setsid clickhouse-server --config-file=/etc/clickhouse-server/config.xml -- \
		--path="$CH_DIR/data/" \
		--tmp_path="$CH_DIR/tmp/" \
		--user_files_path="$CH_DIR/user_files/" \
		--format_schema_path="$CH_DIR/format_schemas/" \
		--listen_host="$HOST" \
		--tcp_port="$CH_TCP_PORT" \
		--http_port="$CH_HTTP_PORT" \
		--interserver_http_port="$CH_INTERSERVER_PORT" \
		--logger.log="$LOG_DIR/clickhouse.log" \
		--logger.errorlog="$LOG_DIR/clickhouse.err.log" \
		</dev/null >>"$LOG_DIR/clickhouse.stdout.log" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$RUN/clickhouse.pid"

	local deadline=$((SECONDS + START_TIMEOUT))
	until ch_ready; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "clickhouse: server exited during start"
			tail_log "$LOG_DIR/clickhouse.stdout.log" "$LOG_DIR/clickhouse.err.log"
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			log "clickhouse: no answer on $HOST:$CH_TCP_PORT after ${START_TIMEOUT}s"
			tail_log "$LOG_DIR/clickhouse.stdout.log" "$LOG_DIR/clickhouse.err.log"
			exit 1
		fi
		sleep 0.3
	done
	log "clickhouse: $(clickhouse-client --host "$HOST" --port "$CH_TCP_PORT" -q 'SELECT version()') ready on $HOST:$CH_TCP_PORT in $(since "$t0") (pid $pid)"
}

# --------------------------------------------------------------------- Kafka

# kafka_fetch fills $KAFKA_LIB with the broker's runtime classpath. The stamp
# file holds the hash of the pom it was resolved from, so an unchanged pom
# means no Maven run at all, and a changed one (new version, extra jar)
# resolves again. Jars land in a temporary folder first: an interrupted
# download never looks complete.
kafka_fetch() {
	local stamp=$KAFKA_LIB/.complete want
	want=$(sha256sum "$POM" | cut -d' ' -f1)
	if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
		return
	fi
	command -v mvn >/dev/null || die "kafka: mvn not found (apt-get install maven)"
	command -v java >/dev/null || die "kafka: java not found (apt-get install default-jre-headless)"

	local t0 tmp
	t0=$(now)
	log "kafka: resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION into $KAFKA_LIB"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/kafka-$KAFKA_VERSION.lib.XXXXXX")
	# A Maven repository of our own inside the cache keeps the script from
	# depending on, or filling, ~/.m2.
	if ! mvn -B -q -f "$POM" \
		-Dmaven.repo.local="$CACHE/m2" \
		dependency:copy-dependencies \
		-DincludeScope=runtime \
		-DoutputDirectory="$tmp" >"$tmp.mvn.log" 2>&1; then
		log "kafka: mvn dependency:copy-dependencies failed"
		tail_log "$tmp.mvn.log"
		rm -rf "$tmp" "$tmp.mvn.log"
		exit 1
	fi
	rm -f "$tmp.mvn.log"
	echo "$want" >"$tmp/.complete"
	rm -rf "$KAFKA_LIB"
	mkdir -p "$(dirname "$KAFKA_LIB")"
	mv "$tmp" "$KAFKA_LIB"
	log "kafka: $(find "$KAFKA_LIB" -name '*.jar' | wc -l) jars ($(du -sh "$KAFKA_LIB" | cut -f1)) fetched in $(since "$t0")"
}

kafka_java() { java -cp "$KAFKA_LIB/*" "$@"; }

kafka_write_config() {
	mkdir -p "$KAFKA_DIR/data" "$LOG_DIR"
	cat >"$KAFKA_DIR/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DIR/data
num.partitions=8
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
	# INFO on the console (redirected to kafka.log) is enough to see why a
	# start failed; the request log and state-change chatter stay quiet.
	cat >"$KAFKA_DIR/log4j2.yaml" <<'EOF'
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: state.change.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: WARN
EOF
	# The tools log through the same slf4j binding; keep their output to
	# what they print themselves.
	cat >"$KAFKA_DIR/tools-log4j2.yaml" <<'EOF'
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
EOF
}

# kafka_ready asks the broker for its topic list with Kafka's own client:
# an open port alone does not mean the broker has joined its controller.
kafka_ready() {
	port_open "$KAFKA_PORT" || return 1
	timeout 30 java -cp "$KAFKA_LIB/*" -Xshare:auto -XX:TieredStopAtLevel=1 \
		-Dlog4j2.configurationFile="$KAFKA_DIR/tools-log4j2.yaml" \
		org.apache.kafka.tools.TopicCommand \
		--bootstrap-server "$HOST:$KAFKA_PORT" --list >/dev/null 2>&1
}

kafka_up() {
	if [[ -n $(pid_of kafka) ]] && port_open "$KAFKA_PORT"; then
		log "kafka: already running (pid $(pid_of kafka))"
		return
	fi
	kafka_ports_free
	kafka_fetch

	local cluster_id
	# A stopped broker's folder is stale (down deletes it; a crash may not):
	# format afresh so every up starts from an empty cluster.
	rm -rf "$KAFKA_DIR"
	kafka_write_config
	: >"$LOG_DIR/kafka.log"
	# A cluster id is 16 random bytes in URL-safe base64 without padding,
	# which is what StorageTool random-uuid prints; making it here saves
	# one JVM start.
	# Like Kafka's Uuid.randomUuid, never start with '-': the tool's argument
	# parser would take such an id for an option (1 run in 64 failed so).
	cluster_id=-
	while [[ $cluster_id == -* ]]; do
		cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
	done
	if ! kafka_java -Dlog4j2.configurationFile="$KAFKA_DIR/tools-log4j2.yaml" \
		kafka.tools.StorageTool format --standalone -t "$cluster_id" \
		-c "$KAFKA_DIR/server.properties" >>"$LOG_DIR/kafka.log" 2>&1; then
		log "kafka: formatting the log folder failed"
		tail_log "$LOG_DIR/kafka.log"
		exit 1
	fi
	kafka_launch
}

kafka_ports_free() {
	local p
	for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
		port_open "$p" && die "kafka: port $p is taken by a process this script did not start"
	done
	return 0
}

# kafka_launch starts the broker on the formatted folder and waits until it
# answers. kafka-start uses it alone, to bring a stopped broker back with
# the data it had (tests stop and start a private broker mid-run).
kafka_launch() {
	local t0 pid
	t0=$(now)
	[[ -f $KAFKA_DIR/server.properties ]] || die "kafka: no formatted broker in $KAFKA_DIR (run kafka-up first)"
	# The readiness probe below waits for this line; an earlier start's
	# copy of it must not count.
	[[ -f $LOG_DIR/kafka.log ]] && mv "$LOG_DIR/kafka.log" "$LOG_DIR/kafka.log.prev"
	: >"$LOG_DIR/kafka.log"

	# A test broker moves little data: C1-only JIT and the serial collector
	# cut its CPU to ready from ~5 s to ~2 s, which is what decides the
	# wall time on two busy cores (measured: 39 s -> 21 s at load 15).
	setsid java -Xms256m -Xmx"${KEYHEAT_SERVICES_KAFKA_HEAP:-1g}" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$KAFKA_LIB/*" \
		-Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.yaml" \
		-Dkafka.logs.dir="$LOG_DIR" \
		kafka.Kafka "$KAFKA_DIR/server.properties" \
		</dev/null >>"$LOG_DIR/kafka.log" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$RUN/kafka.pid"

	# Each readiness probe is a JVM start (1-3 s of CPU on two cores), so
	# probe once the broker's log says it started, not in a busy loop.
	local deadline=$((SECONDS + START_TIMEOUT))
	until grep -q 'Kafka Server started' "$LOG_DIR/kafka.log" && kafka_ready; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "kafka: broker exited during start"
			tail_log "$LOG_DIR/kafka.log"
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			log "kafka: no answer on $HOST:$KAFKA_PORT after ${START_TIMEOUT}s"
			tail_log "$LOG_DIR/kafka.log"
			exit 1
		fi
		sleep 0.5
	done
	log "kafka: $KAFKA_VERSION ready on $HOST:$KAFKA_PORT in $(since "$t0") (pid $pid)"
}

# --------------------------------------------------------------------- Redis

redis_install() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return
	fi
	local t0
	t0=$(now)
	log "redis: installing redis-server with apt-get"
	mkdir -p "$LOG_DIR"
	# Where the package's own service starts on install (a host with an
	# init system), it listens on 6379 and is none of ours: this script's
	# server has its own port and folder.
	if ! as_root env DEBIAN_FRONTEND=noninteractive sh -c \
		'apt-get update -q && apt-get install -y -q redis-server' \
		>"$LOG_DIR/apt-redis.log" 2>&1; then
		log "redis: apt-get failed"
		tail_log "$LOG_DIR/apt-redis.log"
		exit 1
	fi
	log "redis: installed in $(since "$t0")"
}

# redis_cli runs redis-cli against this script's server, for ten seconds at
# most: a server that accepts and never answers must not hang a probe.
redis_cli() { timeout 10 redis-cli -h "$HOST" -p "$REDIS_PORT" "$@"; }

redis_ready() {
	[[ $(redis_cli PING 2>/dev/null) == PONG ]] || return 1
	[[ -f $REDIS_DIR/cluster ]] || return 0
	redis_cli CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok'
}

redis_up() {
	if [[ -n $(pid_of redis) ]] && redis_ready; then
		log "redis: already running (pid $(pid_of redis))"
		return
	fi
	port_open "$REDIS_PORT" && die "redis: port $REDIS_PORT is taken by a process this script did not start"
	redis_install

	local t0 pid cluster=()
	t0=$(now)
	# Nothing is kept from an earlier run: the server persists nothing, and
	# a cluster node's nodes.conf would name an identity and slots of the
	# last run.
	rm -rf "$REDIS_DIR"
	mkdir -p "$REDIS_DIR" "$LOG_DIR"
	if [[ ${KEYHEAT_SERVICES_REDIS_CLUSTER:-0} == 1 ]]; then
		: >"$REDIS_DIR/cluster"
		cluster=(--cluster-enabled yes --cluster-config-file "$REDIS_DIR/nodes.conf")
	fi
	: >"$LOG_DIR/redis.log"
	# --daemonize no keeps the server the child whose pid $! is; --save ""
	# and --appendonly no turn persistence off (tests need none, and a
	# snapshot fork doubles memory under load). The empty --logfile sends
	# the log to stdout, which goes to redis.log.
	setsid redis-server \
		--bind "$HOST" \
		--port "$REDIS_PORT" \
		--daemonize no \
		--dir "$REDIS_DIR" \
		--save "" \
		--appendonly no \
		--logfile "" \
		"${cluster[@]}" \
		</dev/null >>"$LOG_DIR/redis.log" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$RUN/redis.pid"

	local deadline=$((SECONDS + START_TIMEOUT)) slots=0
	until redis_ready; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "redis: server exited during start"
			tail_log "$LOG_DIR/redis.log"
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			log "redis: no answer on $HOST:$REDIS_PORT after ${START_TIMEOUT}s"
			tail_log "$LOG_DIR/redis.log"
			exit 1
		fi
		# A fresh cluster node answers PING but serves no key until it
		# holds the slots: give it all of them, once.
		if [[ -n ${cluster[*]} ]] && ((slots == 0)) && [[ $(redis_cli PING 2>/dev/null) == PONG ]]; then
			redis_cli CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
			slots=1
		fi
		sleep 0.05
	done
	log "redis: $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')${cluster[*]:+ (cluster mode)} ready on $HOST:$REDIS_PORT in $(since "$t0") (pid $pid)"
}

# ---------------------------------------------------------------- lifecycle

stop() { # stop NAME: TERM, wait, then KILL; the pid file goes either way
	local name=$1 pid
	pid=$(pid_of "$name")
	rm -f "$RUN/$name.pid"
	if [[ -z $pid ]]; then
		log "$name: not running"
		return
	fi
	local t0 deadline=$((SECONDS + STOP_TIMEOUT))
	t0=$(now)
	kill -TERM "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "$name: still running ${STOP_TIMEOUT}s after TERM, sending KILL"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	log "$name: stopped in $(since "$t0")"
}

status() {
	local name port pid rc=0
	for name in clickhouse kafka redis; do
		case $name in
		clickhouse) port=$CH_TCP_PORT ;;
		kafka) port=$KAFKA_PORT ;;
		redis) port=$REDIS_PORT ;;
		esac
		pid=$(pid_of "$name")
		if [[ -n $pid ]]; then
			echo "$name: running, pid $pid, $HOST:$port"
		else
			echo "$name: stopped"
			rc=3
		fi
	done
	return "$rc"
}

# with_lock serialises up/down so two callers never start a service twice.
# The daemons are started with "9>&-": a daemon inheriting the lock's fd would
# hold the lock for as long as it runs.
with_lock() {
	mkdir -p "$RUN"
	exec 9>"$RUN/.lock"
	flock 9
}

main() {
	case ${1:-} in
	up)
		with_lock
		local t0
		t0=$(now)
		ch_up
		kafka_up
		redis_up
		log "up: all services ready in $(since "$t0")"
		print_env
		;;
	down)
		with_lock
		stop redis
		stop kafka
		stop clickhouse
		rm -rf "$CH_DIR" "$KAFKA_DIR" "$REDIS_DIR"
		log "down: data removed; logs stay in $LOG_DIR"
		;;
	env) print_env ;;
	status) status ;;
	kafka-up)
		with_lock
		kafka_up
		print_env
		;;
	kafka-stop)
		with_lock
		stop kafka
		;;
	kafka-start)
		with_lock
		if [[ -n $(pid_of kafka) ]] && port_open "$KAFKA_PORT"; then
			log "kafka: already running (pid $(pid_of kafka))"
		else
			kafka_ports_free
			kafka_launch
		fi
		;;
	kafka-down)
		with_lock
		stop kafka
		rm -rf "$KAFKA_DIR"
		;;
	clickhouse-up)
		with_lock
		# Like kafka-up, a fresh server: a stale folder (a crashed test's)
		# must not hand a test someone else's tables.
		[[ -n $(pid_of clickhouse) ]] || rm -rf "$CH_DIR"
		ch_up
		print_env
		;;
	clickhouse-stop)
		with_lock
		stop clickhouse
		;;
	clickhouse-start)
		with_lock
		ch_up
		;;
	clickhouse-down)
		with_lock
		stop clickhouse
		rm -rf "$CH_DIR"
		;;
	redis-up | redis-start)
		# The same: a server that keeps nothing starts empty either way.
		with_lock
		redis_up
		[[ $1 == redis-start ]] || print_env
		;;
	redis-stop)
		with_lock
		stop redis
		;;
	redis-down)
		with_lock
		stop redis
		rm -rf "$REDIS_DIR"
		;;
	*)
		echo "usage: $0 up|down|env|status|kafka-up|kafka-stop|kafka-start|kafka-down|clickhouse-up|clickhouse-stop|clickhouse-start|clickhouse-down|redis-up|redis-stop|redis-start|redis-down" >&2
		exit 2
		;;
	esac
}

main "$@"
