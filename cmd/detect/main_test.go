package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConfigErrorsBeforeKafka: whatever is wrong in the configuration is
// reported before detect connects to a broker.
func TestConfigErrorsBeforeKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"from", []string{"run", "--from=yesterday"}, `detect.from: "yesterday" is not earliest, latest or an RFC 3339 time`},
		{"format", []string{"run", "--format=syslog"}, `detect.format: "syslog"`},
		{"regex format without pattern", []string{"run", "--format=regex"}, "detect.regex: pattern must be set"},
		{"print", []string{"run", "--print=xml"}, `--print="xml": want text or json`},
		{"rules", []string{"run", `--pipeline.rules=[{name: x, key: "*", window: 1s}]`}, "pipeline.rules: rules[0] (x): set rate"},
		{"rules not yaml", []string{"run", `--pipeline.rules=[{name: x`}, "pipeline.rules:"},
		{"groups", []string{"run", "--detect.merge_group=keyheat-detect"}, "detect.merge_group:"},
		{"reads its output", []string{"run", "--detect.topics=keyheat.reports"}, `detect.topics: "keyheat.reports" is also kafka.topics.reports`},
		{"clickhouse", []string{"run", "--clickhouse.enabled", "--clickhouse.batch_rows=0"}, "clickhouse.batch_rows:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, conns := testenv.CountingListener(t)
			root := newRoot(&bytes.Buffer{})
			root.SetArgs(append(tc.args, "--kafka.brokers="+addr, "--log.level=error"))
			root.SetOut(&bytes.Buffer{})
			err := root.ExecuteContext(context.Background())
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, conns.Load(), "detect connected to Kafka before it found: %v", err)
		})
	}
}

// TestHelpListsDetectKeys: detect run --help offers the keys detect
// reads and its own flags, not ingest's.
func TestHelpListsDetectKeys(t *testing.T) {
	root := newRoot(&bytes.Buffer{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"run", "--help"})
	require.NoError(t, root.Execute())
	help := out.String()
	for _, want := range []string{"--kafka.brokers", "--detect.group", "--pipeline.rules", "--merge.top_n", "--clickhouse.enabled",
		"--archive.root", "--from", "--format", "--exit-at-end", "--print"} {
		require.Contains(t, help, want)
	}
	require.NotContains(t, help, "--ingest.")
}

// TestDemo: the README's first command starts with nothing installed,
// alerts the planted key, serves the dashboard's API where it says with
// the key listed and a token that promotes, and stops cleanly on SIGTERM.
func TestDemo(t *testing.T) {
	p := start(t, nil, "demo", "--port=0", "--rate=4000", "--hot=key=smoke:hot,start=0s,for=10m,share=50%")
	p.WaitStdout(`^keyheat demo: Kafka on 127\.0\.0\.1:\d+`)
	dash := regexp.MustCompile(`^Dashboard: (http://127\.0\.0\.1:\d+/) \(token for promote and demote, this run only: ([0-9a-f]{32})\)`).
		FindStringSubmatch(p.WaitStdout(`^Dashboard: `))
	require.Len(t, dash, 3, "the dashboard line names its URL and token")
	line := p.WaitStdout(`HOT +shop "smoke:hot"`)
	require.Contains(t, line, "rule=default")
	p.WaitStdout(`window events=\d+ .* top: shop/smoke:hot `)
	testenv.Eventually(t, "the hot key listed by the API", func() bool { return listed(t, dash[1], "shop", "smoke:hot") == "detector" })
	code, b := apiCall(t, "POST", dash[1]+"api/hotkeys/product:7/promote", dash[2], map[string]any{"app": "shop", "mitigation": "local_cache", "ttl": "1m"})
	require.Equal(t, http.StatusCreated, code, "%s", b)
	require.Equal(t, 0, p.Stop(), "a stop by SIGTERM is a clean exit")
	require.Empty(t, p.Stderr.Match(regexp.MustCompile(`level=(ERROR|WARN)`)), "no warning or error in the log")
	require.NotEmpty(t, p.Stderr.Match(regexp.MustCompile(`msg="partitions released".*lost=false`)), "the stop committed its partitions")
	require.False(t, strings.Contains(p.Stdout.String(), "\x1b["), "no terminal control codes when stdout is not a terminal")
}
