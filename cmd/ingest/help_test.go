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
	"github.com/keyheat/keyheat/internal/testenv"
)

// readsKey reports whether key is one of reads or in a section of them.
func readsKey(reads []string, key string) bool {
	return slices.ContainsFunc(reads, func(r string) bool { return key == r || strings.HasPrefix(key, r+".") })
}

func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot(nil)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	require.NoError(t, root.ExecuteContext(context.Background()), "ingest %v", args)
	return out.String()
}

// TestHelpListsWhatEachSourceReads: each command's --help lists the flags
// of exactly the config keys it reads, and --help-all every flag.
func TestHelpListsWhatEachSourceReads(t *testing.T) {
	for _, tc := range []struct {
		cmd       string
		reads     []string
		want, not []string
	}{
		{cmd: "", want: []string{"tail", "stdin", "topic", "gen"}, not: []string{"--kafka.brokers", "--ingest.format"}},
		{cmd: "tail", reads: tailReads, want: []string{"--from-start", "--ingest.rotated", "--ingest.tail_id", "--ingest.format"},
			not: []string{"--ingest.topic.", "--ingest.spill_file", "--ingest.end_timeout"}},
		{cmd: "stdin", reads: stdinReads, want: []string{"--ingest.spill_file", "--ingest.format"},
			not: []string{"--ingest.topic.", "--ingest.rotated", "--ingest.tail_id"}},
		{cmd: "topic", reads: topicReads, want: []string{"--ingest.topic.group", "--ingest.format"},
			not: []string{"--ingest.rotated", "--ingest.spill_file"}},
		{cmd: "gen", reads: genReads, want: []string{"--rate", "--hot", "--ingest.app", "--events.codec", "--kafka.brokers"},
			not: []string{"--ingest.format", "--ingest.json.", "--ingest.rotated", "--ingest.topic.", "--events.max_skew"}},
	} {
		t.Run("help "+tc.cmd, func(t *testing.T) {
			help := helpOf(t, append(strings.Fields(tc.cmd), "--help")...)
			for _, w := range append(tc.want, "--help-all", "--config") {
				require.Contains(t, help, w)
			}
			for _, n := range tc.not {
				require.NotContains(t, help, n, "ingest %s does not read %s", tc.cmd, n)
			}
			for _, k := range config.CmdIngest.Keys() {
				if readsKey(tc.reads, k) {
					require.Contains(t, help, "--"+k+" ", "ingest %s reads %s", tc.cmd, k)
				} else {
					require.NotContains(t, help, "--"+k+" ", "ingest %s does not read %s", tc.cmd, k)
				}
			}
			require.Regexp(t, `--help-all lists (them|it)`, help)
		})
		t.Run("help-all "+tc.cmd, func(t *testing.T) {
			args := strings.Fields(tc.cmd)
			help := helpOf(t, append(args, "--help-all")...)
			cmd, _, err := newRoot(nil).Find(args)
			require.NoError(t, err)
			for _, fs := range []*pflag.FlagSet{cmd.LocalFlags(), cmd.InheritedFlags()} {
				fs.VisitAll(func(f *pflag.Flag) { require.Contains(t, help, "--"+f.Name+" ") })
			}
			for _, k := range config.CmdIngest.Keys() {
				require.Contains(t, help, "--"+k+" ")
			}
		})
	}
}

// TestKeysOfOtherCommandsAreChecked: one config file serves every
// command, so a bad value in it stops every command at start, also one
// that does not read the key, before any contact with Kafka: gen refuses
// a regex format without its pattern, though it parses no line.
func TestKeysOfOtherCommandsAreChecked(t *testing.T) {
	addr, conns := testenv.CountingListener(t)
	root := newRoot(nil)
	root.SetArgs([]string{"gen", "--count=1", "--ingest.format=regex", "--kafka.brokers=" + addr, "--kafka.connect_timeout=1s", "--log.level=error"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	err := root.ExecuteContext(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), "ingest.regex", "the error names the key to fix")
	require.Zero(t, conns.Load(), "refused before contacting Kafka")
}
