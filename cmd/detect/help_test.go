package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
)

// readsKey reports whether key is one of reads or in a section of them.
func readsKey(reads []string, key string) bool {
	return slices.ContainsFunc(reads, func(r string) bool { return key == r || strings.HasPrefix(key, r+".") })
}

// helpOf runs detect with args and returns what it printed.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot(&bytes.Buffer{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	require.NoError(t, root.ExecuteContext(context.Background()), "detect %v", args)
	return out.String()
}

// TestHelpListsWhatEachCommandReads: each command's --help lists the
// flags of exactly the config keys it reads, besides its own flags, and
// says that --help-all lists the rest; --help-all lists every flag it
// accepts.
func TestHelpListsWhatEachCommandReads(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		reads []string
		// own flags, and keys checked by name on top of reads
		want, not []string
	}{
		{cmd: "", want: []string{"--config", "--help-all", "query", "run", "replay", "demo"},
			not: []string{"--kafka.brokers", "--clickhouse.addr", "--pipeline.window"}},
		{cmd: "run", reads: runReads, want: []string{"--from", "--format", "--exit-at-end", "--print", "--kafka.brokers", "--detect.group",
			"--pipeline.rules", "--merge.top_n", "--clickhouse.enabled", "--archive.root", "--api.addr"},
			not: []string{"--ingest.", "--events.codec", "--kafka.connect_timeout"}},
		{cmd: "demo", reads: demoReads, want: []string{"--port", "--rate", "--hot", "--kafka.tls.enabled", "--events.codec"},
			not: []string{"--kafka.brokers", "--ingest."}},
		{cmd: "replay", reads: replayReads, want: []string{"--from", "--to-topic", "--archive.root", "--pipeline.rules", "--merge.top_n",
			"--clickhouse.addr", "--clickhouse.batch_rows", "--kafka.brokers", "--events.codec", "--detect.keyed"},
			not: []string{"--api.", "--metrics.addr", "--detect.group", "--clickhouse.enabled", "--kafka.topics.", "--ingest."}},
		{cmd: "query", reads: queryReads, want: []string{"--since", "--limit", "--clickhouse.addr", "--clickhouse.database",
			"--clickhouse.password_file"},
			not: []string{"--pipeline.", "--kafka.", "--merge.", "--api.", "--archive.", "--clickhouse.batch_rows", "--clickhouse.enabled"}},
		{cmd: "example-config", not: []string{"--kafka.brokers", "--pipeline.window"}},
	} {
		t.Run("help "+tc.cmd, func(t *testing.T) {
			args := append(strings.Fields(tc.cmd), "--help")
			help := helpOf(t, args...)
			for _, w := range append(tc.want, "--help-all", "--config") {
				require.Contains(t, help, w, "detect %s --help lists %s", tc.cmd, w)
			}
			for _, n := range tc.not {
				require.NotContains(t, help, n, "detect %s --help lists %s, which it does not read", tc.cmd, n)
			}
			for _, k := range config.CmdDetect.Keys() {
				if readsKey(tc.reads, k) {
					require.Contains(t, help, "--"+k+" ", "detect %s reads %s", tc.cmd, k)
				} else {
					require.NotContains(t, help, "--"+k+" ", "detect %s does not read %s", tc.cmd, k)
				}
			}
			require.Regexp(t, `--help-all lists (them|it)`, help, "the help says where the other flags are")
		})
		t.Run("help-all "+tc.cmd, func(t *testing.T) {
			args := strings.Fields(tc.cmd)
			help := helpOf(t, append(args, "--help-all")...)
			root := newRoot(&bytes.Buffer{})
			cmd, _, err := root.Find(args)
			require.NoError(t, err)
			n := 0
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
				n++
				require.Contains(t, help, "--"+f.Name+" ", "detect %s --help-all lists every flag", tc.cmd)
			})
			cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
				n++
				require.Contains(t, help, "--"+f.Name+" ", "detect %s --help-all lists every flag", tc.cmd)
			})
			require.Greater(t, n, len(config.CmdDetect.Keys()), "every key is a flag")
			require.NotRegexp(t, `--help-all lists (them|it)`, help)
		})
	}
}

// TestHelpAllWithoutArguments: query --help-all shows the help, as
// --help does, though query wants arguments.
func TestHelpAllWithoutArguments(t *testing.T) {
	help := helpOf(t, "query", "--help-all")
	require.Contains(t, help, "Accepted and checked, but not read by detect query")
	require.Contains(t, help, "--pipeline.window ")
}

// TestFlagsOfOtherCommandsStillAccepted: the help leaves them out, the
// command still takes them (one config file, one environment, serve
// every command).
func TestFlagsOfOtherCommandsStillAccepted(t *testing.T) {
	root := newRoot(&bytes.Buffer{})
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"query", "top", "--since=-1h", "--pipeline.window=2s", "--api.max_ttl=1h", "--kafka.brokers=127.0.0.1:1"})
	err := root.ExecuteContext(context.Background())
	require.ErrorContains(t, err, "--since=-1h0m0s: want a positive duration", "the flags parsed; the range is what is wrong")
}

// TestHelpListsTheClickHouseConnection: query and replay connect to
// ClickHouse with every clickhouse key but the writer's and enabled (TLS
// included), so their --help lists each of them.
func TestHelpListsTheClickHouseConnection(t *testing.T) {
	for _, cmd := range []string{"query", "replay"} {
		help := helpOf(t, cmd, "--help")
		for _, k := range config.CmdDetect.Keys() {
			if !strings.HasPrefix(k, "clickhouse.") || k == "clickhouse.enabled" || slices.Contains(chWrite, k) {
				continue
			}
			require.True(t, strings.Contains(help, "--"+k+" "), "detect %s connects with %s; its --help does not list it", cmd, k)
		}
	}
}
