package reload

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
)

var _ Reloader = (*detect.Service)(nil)

// service builds a detect service (never run) from the config file, as
// detect run does, and returns it with its metrics' registry.
func service(t *testing.T, src config.Source) (*detect.Service, *prometheus.Registry) {
	t.Helper()
	cfg, err := config.Load(config.CmdDetect, src)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	svc, err := detect.New(detect.Config{Options: cfg.Detect, ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.KFake(t)...)},
		Topics: detect.OutputTopics{Events: cfg.Kafka.Topics.Events, DLQ: cfg.Kafka.Topics.DLQ, Hotkeys: cfg.Kafka.Topics.Hotkeys,
			Windows: cfg.Kafka.Topics.Windows, Reports: cfg.Kafka.Topics.Reports, Progress: cfg.Kafka.Topics.Progress},
		Pipeline: cfg.Pipeline, Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(svc.Close)
	return svc, reg
}

func reloads(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "keyheat_detect_rule_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

const (
	ruleR   = "pipeline:\n  rules: [{name: r, key: \"*\", window: 1s, rate: 100}]\n"
	ruleTwo = "pipeline:\n  rules: [{name: a, key: \"a*\", window: 1s, rate: 100}, {name: b, key: \"*\", window: 1s, rate: 50}]\n"
)

// TestPolicy: each content the file takes after ruleR, in turn, applied
// to a real service or refused before it, with what the log says. The
// service's own counter of applied reloads says whether the rules
// reached it; a refusal by the policy never does.
func TestPolicy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keyheat.yaml")
	require.NoError(t, os.WriteFile(file, []byte(ruleR), 0o600))
	src := config.Source{File: file}
	svc, reg := service(t, src)
	var log bytes.Buffer
	p := newPolicy(src, svc, slog.New(slog.NewTextHandler(&log, nil)))
	require.True(t, p.rulesInFile, "the file at start sets pipeline.rules")

	steps := []struct {
		name, file string
		applied    bool
		logs       string
		refusedBy  string // "" for the policy, "service" for detect.Service.Reload
	}{
		{"emptied", "", false, `the file is empty`, ""},
		{"comments only", "# nothing yet\n", false, `the file is empty`, ""},
		{"rules section gone", "log:\n  level: info\n", false, `the file no longer has pipeline.rules`, ""},
		{"bad yaml", "pipeline: [\n", false, `config file changed but refused`, ""},
		{"bad rule", "pipeline:\n  rules: [{name: r, key: \"*\", window: 1s, rate: -1}]\n", false, `config file changed but refused`, ""},
		{"window changed", "pipeline:\n  window: 2s\n" + "  rules: [{name: r, key: \"*\", window: 1s, rate: 100}]\n", false,
			`only rules, whitelist, read_ops and write_ops reload while running`, "service"},
		{"two rules", ruleTwo, true, `msg="rules reloaded" file=` + file + ` rules=2 whitelist=0`, ""},
		{"no rules now", "pipeline:\n  rules: []\n", true, `rules=0`, ""},
	}
	wantApplied, wantRefused := 0.0, 0.0
	for _, s := range steps {
		before := len(log.String())
		require.NoError(t, os.WriteFile(file, []byte(s.file), 0o600))
		require.Equal(t, s.applied, p.changed(), "%s: applied", s.name)
		said := log.String()[before:]
		require.Contains(t, said, s.logs, "%s: the log says why", s.name)
		if !s.applied {
			require.Contains(t, said, `level=ERROR msg="config file changed but refused; the rules in force stay"`, s.name)
		}
		if s.applied {
			wantApplied++
		}
		if s.refusedBy == "service" {
			wantRefused++
		}
		require.Equal(t, wantApplied, reloads(t, reg, "applied"), "%s: rules that reached the service", s.name)
		require.Equal(t, wantRefused, reloads(t, reg, "refused"), "%s: rules the service refused", s.name)
	}
	// The file in force ("rules: []") sets pipeline.rules: losing them is
	// still refused.
	require.NoError(t, os.WriteFile(file, []byte("log:\n  level: info\n"), 0o600))
	require.False(t, p.changed())
}

// TestPolicyFileWithoutRules: a file that never set pipeline.rules may
// go on without them (the default rule stays the default).
func TestPolicyFileWithoutRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keyheat.yaml")
	require.NoError(t, os.WriteFile(file, []byte("log:\n  level: info\n"), 0o600))
	src := config.Source{File: file}
	svc, reg := service(t, src)
	p := newPolicy(src, svc, nil)
	p.log = slog.New(slog.DiscardHandler)
	require.False(t, p.rulesInFile)
	require.NoError(t, os.WriteFile(file, []byte("log:\n  level: debug\n"), 0o600))
	require.True(t, p.changed())
	require.Equal(t, 1.0, reloads(t, reg, "applied"))
}

// TestWatch: Watch applies a file rewritten by a rename over it (as
// editors save), and returns when ctx ends.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keyheat.yaml")
	require.NoError(t, os.WriteFile(file, []byte(ruleR), 0o600))
	src := config.Source{File: file}
	svc, reg := service(t, src)
	var log bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, src, svc, slog.New(slog.NewTextHandler(&log, nil)))
	}()
	// The watch may start after a rewrite below, and then takes it for
	// the file at start: rewrite, with one content and then the other,
	// until a reload is seen.
	tmp := filepath.Join(dir, "keyheat.yaml.tmp")
	contents := []string{ruleTwo, ruleR}
	for i := 0; reloads(t, reg, "applied") == 0; i++ {
		require.Less(t, i, 3000, "no reload seen") // the log is read once Watch returned
		// Each rewrite restarts the watch's settling: a new one only
		// after a pause well past it.
		if i%20 == 0 {
			require.NoError(t, os.WriteFile(tmp, []byte(contents[i/20%2]), 0o600))
			require.NoError(t, os.Rename(tmp, file))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	require.Regexp(t, `msg="rules reloaded" file=`+regexp.QuoteMeta(file)+` rules=[12] whitelist=0`, log.String())
}

// TestWatchWithoutFile: no file, nothing to watch.
func TestWatchWithoutFile(t *testing.T) {
	Watch(context.Background(), config.Source{}, nil, nil) // returns at once
}

func TestFileRules(t *testing.T) {
	for _, tc := range []struct {
		name, file      string
		empty, hasRules bool
		wantErr         bool
	}{
		{name: "empty", file: "", empty: true},
		{name: "blank and comments", file: "\n  \n# x\n", empty: true},
		{name: "rules", file: "pipeline:\n  rules: [{name: r, key: \"*\", window: 1s, rate: 1}]\n", hasRules: true},
		{name: "empty rules", file: "pipeline:\n  rules: []\n", hasRules: true},
		{name: "pipeline without rules", file: "pipeline:\n  window: 1s\n"},
		{name: "empty pipeline", file: "pipeline:\n"},
		{name: "other sections", file: "log:\n  level: debug\n"},
		{name: "bad yaml", file: "pipeline: [\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			empty, hasRules, err := fileRules([]byte(tc.file))
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.empty, empty, "empty")
			require.Equal(t, tc.hasRules, hasRules, "hasRules")
		})
	}
}
