package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConfigErrorsBeforeKafka: whatever is wrong in the configuration, or
// in what a subcommand builds from it, is reported before ingest connects
// to a broker (it used to create the topics first).
func TestConfigErrorsBeforeKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"json time format", []string{"stdin", "--ingest.format=json", "--ingest.json.time_format=unix_sec"}, `ingest.json: time_format "unix_sec"`},
		{"regex", []string{"stdin", "--ingest.format=regex", "--ingest.regex.pattern=(?P<key>"}, "ingest.regex: error parsing regexp"},
		{"raw topic is an output", []string{"topic", "keyheat.events"}, `ingest.topic.topics: "keyheat.events" is also an output topic`},
		{"no raw topic", []string{"topic"}, "no raw topic to read"},
		{"illegal tail id", []string{"tail", "--ingest.tail_id=web 1", "a.log"}, "ingest.tail_id:"},
		{"gen without an end", []string{"gen"}, "gen: set a duration or a count"},
		{"no keys", []string{"gen", "--count=1", "--keys=0"}, "gen: keys 0 is outside 1..10000000"},
		{"hot key without share", []string{"gen", "--count=1", "--hot=key=a"}, `--hot: hot key "key=a": share: required`},
		{"hot share above 100%", []string{"gen", "--count=1", "--hot=key=a,share=150%"}, `share: 150% is outside (0%, 100%]`},
		{"hot share without %", []string{"gen", "--count=1", "--hot=key=a,share=5"}, `share: "5" has no % sign; give a percentage, e.g. share=5%`},
		{"hot key with a bad for", []string{"gen", "--count=1", "--hot=key=a,share=5%,for=-1s"}, "for: -1s is not positive"},
		{"hot key shares above 100%", []string{"gen", "--count=1", "--hot=key=a,share=60%", "--hot=key=b,share=60%"}, "gen: planted shares add up to 120%"},
		{"binary keys", []string{"stdin", "--events.codec=json", "--events.allow_binary_keys"}, "events.allow_binary_keys: needs events.codec: binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, conns := testenv.CountingListener(t)
			root := newRoot(nil)
			root.SetArgs(append(tc.args, "--kafka.brokers="+addr, "--log.level=error"))
			root.SetOut(&bytes.Buffer{})
			err := root.ExecuteContext(context.Background())
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, conns.Load(), "ingest connected to Kafka before it found: %v", err)
		})
	}
}

// TestHelpListsOnlyIngestKeys: ingest --help offers the keys ingest reads,
// not detect's.
func TestHelpListsOnlyIngestKeys(t *testing.T) {
	root := newRoot(nil)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"tail", "--help"})
	require.NoError(t, root.Execute())
	help := out.String()
	for _, want := range []string{"--kafka.brokers", "--kafka.connect_timeout", "--ingest.format", "--ingest.tail_id", "--ingest.rotated",
		"--ingest.stop_timeout", "--events.allow_binary_keys", "--from-start"} {
		require.Contains(t, help, want)
	}
	for _, not := range []string{"--clickhouse.", "--kafka.topics.hotkeys", "--kafka.topics.reports"} {
		require.NotContains(t, help, not)
	}
}

func TestPrintError(t *testing.T) {
	var b bytes.Buffer
	printError(&b, errors.New("kafka.brokers: must not be empty"))
	require.Equal(t, "ingest: kafka.brokers: must not be empty\n", b.String())
	b.Reset()
	printError(&b, errors.Join(errors.New("log.level: x"), errors.New("kafka.partitions: y")))
	require.Equal(t, "ingest: 2 problems:\n  log.level: x\n  kafka.partitions: y\n", b.String())
}

// TestTailNeedsItsPositionsTopic: the tail's positions are written at
// start; a positions topic it may not create is an error before anything
// is read, naming the topic and what to do.
func TestTailNeedsItsPositionsTopic(t *testing.T) {
	seeds := testenv.KFake(t)
	events, dlq := testenv.NewTopic(t, seeds, 1), testenv.NewTopic(t, seeds, 1)
	root := newRoot(nil)
	root.SetArgs([]string{"tail", filepath.Join(t.TempDir(), "a.log"), "--kafka.brokers=" + strings.Join(seeds, ","),
		"--kafka.topics.events=" + events, "--kafka.topics.dlq=" + dlq, "--kafka.create_topics=false",
		"--ingest.positions_topic=no.such.positions", "--log.level=error"})
	err := root.ExecuteContext(context.Background())
	require.ErrorContains(t, err, "kafka topics no.such.positions do not exist: create them, or set kafka.create_topics: true")
}
