package testenv

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is a Kafka cluster of a test's own that the test can stop and
// start again, keeping its data and its address: for tests of what
// clients do while Kafka is away. It is closed when the test ends.
type Broker struct {
	seeds []string
	stop  func(testing.TB)
	start func(testing.TB)

	mu      sync.Mutex
	running bool
}

// Seeds returns the broker's address.
func (b *Broker) Seeds() []string { return b.seeds }

// Stop stops the broker; clients get connection refused until Start.
func (b *Broker) Stop(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		b.stop(t)
		b.running = false
	}
}

// Start starts the stopped broker again on the same address with the data
// it had.
func (b *Broker) Start(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		b.start(t)
		b.running = true
	}
}

// RestartableKFake starts a one-broker kfake cluster that persists its data
// to a folder of the test's, so that Stop and Start keep the topics,
// records, groups and transactions.
func RestartableKFake(t testing.TB) *Broker {
	t.Helper()
	port := FreePort(t)
	dir := t.TempDir()
	var c *kfake.Cluster
	b := &Broker{seeds: []string{"127.0.0.1:" + strconv.Itoa(port)}}
	b.start = func(t testing.TB) {
		t.Helper()
		var err error
		// The port was just given up by the stopped cluster; a moment may
		// pass before it can be bound again.
		for range 100 {
			c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir))
			if err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("start kfake on port %d: %v", port, err)
	}
	b.stop = func(testing.TB) { c.Close() }
	b.Start(t)
	t.Cleanup(func() { b.Stop(t) })
	return b
}

// PrivateKafka starts a real Apache Kafka broker of the test's own, with
// scripts/services.sh (kafka-up) on ports no other test uses and a run
// folder of its own, so stopping it disturbs nothing else. It needs what
// the real services need: like [KafkaSeeds] it skips the test when
// KEYHEAT_TEST_KAFKA is unset (fails under CI=true), and it reuses the
// broker jars `scripts/services.sh up` fetched. A start takes some 20 to
// 60 seconds on two busy cores.
func PrivateKafka(t testing.TB) *Broker {
	t.Helper()
	Require(t, EnvKafka)
	// services.sh places the broker at 19092 and its controller at 19093,
	// plus an offset.
	off := freeOffset(t, 19092, 19093)
	run := servicesRunner(t, off, "KEYHEAT_SERVICES_KAFKA_HEAP=512m")
	b := &Broker{seeds: []string{"127.0.0.1:" + strconv.Itoa(19092+off)}}
	b.start = func(t testing.TB) { run(t, "kafka-start") }
	b.stop = func(t testing.TB) { run(t, "kafka-stop") }
	run(t, "kafka-up")
	b.running = true
	t.Cleanup(func() { run(t, "kafka-down") })
	return b
}

// freeOffset returns a port offset for scripts/services.sh at which every
// one of ports, plus the offset, is free now. Offsets stay below 5000, so
// every port a private service listens on (the highest, a Redis cluster
// node's bus port, 26379 + offset) is below Linux's default ephemeral
// range (32768 and up), where a client's outgoing connection can take it
// between this check and the server's bind.
func freeOffset(t testing.TB, ports ...int) int {
	t.Helper()
	for range 100 {
		off := 1000 + rand.IntN(4000)
		free := true
		for _, p := range ports {
			free = free && portFree(p+off)
		}
		if free {
			return off
		}
	}
	t.Fatalf("no free ports %v plus an offset for a private service", ports)
	return 0
}

// servicesRunner returns a function that runs a scripts/services.sh
// subcommand with a run folder of the test's own and the port offset off,
// failing the test with the script's output when it fails.
func servicesRunner(t testing.TB, off int, env ...string) func(t testing.TB, what string) {
	t.Helper()
	script := filepath.Join(repoRoot(t), "scripts", "services.sh")
	dir := t.TempDir()
	return func(t testing.TB, what string) {
		t.Helper()
		cmd := exec.Command("bash", script, what)
		cmd.Env = append(os.Environ(), append([]string{"KEYHEAT_SERVICES_DIR=" + dir,
			"KEYHEAT_SERVICES_PORT_OFFSET=" + strconv.Itoa(off)}, env...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("services.sh %s: %v\n%s", what, err, out.String())
		}
	}
}

// repoRoot is the folder holding the module's go.mod, above the test's
// working folder.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working folder: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the working folder")
		}
		dir = parent
	}
}
