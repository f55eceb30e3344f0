package cli

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPrintError(t *testing.T) {
	var b bytes.Buffer
	PrintError(&b, "detect", errors.New("kafka.brokers: must not be empty"))
	require.Equal(t, "detect: kafka.brokers: must not be empty\n", b.String())
	b.Reset()
	PrintError(&b, "detect", errors.Join(errors.New("log.level: x"), errors.New("kafka.partitions: y")))
	require.Equal(t, "detect: 2 problems:\n  log.level: x\n  kafka.partitions: y\n", b.String())
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log := NewLogger(config.Log{Level: "warn", Format: "json"}, &b)
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	require.NotContains(t, b.String(), "hidden")
	require.Contains(t, b.String(), `"msg":"shown","k":1`)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test against a local server
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Add(3)
	var notReady atomic.Pointer[error]
	srv, err := Serve("127.0.0.1:0", reg, func() error {
		if e := notReady.Load(); e != nil {
			return *e
		}
		return nil
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer srv.Close()
	base := "http://" + srv.Addr()

	code, body := get(t, base+"/metrics")
	require.Equal(t, 200, code)
	require.Contains(t, body, "keyheat_test_total 3")
	code, _ = get(t, base+"/livez")
	require.Equal(t, 200, code)
	code, _ = get(t, base+"/readyz")
	require.Equal(t, 200, code)
	e := errors.New("clickhouse inserts failing")
	notReady.Store(&e)
	code, body = get(t, base+"/readyz")
	require.Equal(t, 503, code)
	require.Contains(t, body, "clickhouse inserts failing")
	code, _ = get(t, base+"/livez")
	require.Equal(t, 200, code, "a sink retrying is not a reason to restart the process")

	_, err = Serve(srv.Addr(), reg, nil, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "metrics.addr")
	srv.Close()
	srv.Close() // idempotent
}

// TestSetupHelpRefusesUnknownKeys: a command that says it reads a key the
// config does not have is a typo, caught when the tree is built.
func TestSetupHelpRefusesUnknownKeys(t *testing.T) {
	root := &cobra.Command{Use: "x"}
	sub := &cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(sub)
	Reads(sub, "clickhouse.adr")
	require.PanicsWithValue(t, `cli: x sub reads "clickhouse.adr", which is no key of detect`, func() { SetupHelp(root, config.CmdDetect, nil) })
}

// TestSetupHelpReadsByName: the keys SetupHelp is given for a command by
// name are the ones its help lists; a name root has no command of is a
// typo, caught when the tree is built, and so is a key given that way.
func TestSetupHelpReadsByName(t *testing.T) {
	build := func() *cobra.Command {
		root := &cobra.Command{Use: "x"}
		config.AddFlags(root.PersistentFlags(), config.CmdDetect)
		root.AddCommand(&cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}})
		return root
	}
	root := build()
	SetupHelp(root, config.CmdDetect, map[string][]string{"sub": {"pipeline.window"}})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"sub", "--help"})
	require.NoError(t, root.Execute())
	require.Contains(t, out.String(), "--pipeline.window ")
	require.NotContains(t, out.String(), "--clickhouse.addr ")

	require.PanicsWithValue(t, `cli: x has no command "suv" to read [log]`,
		func() { SetupHelp(build(), config.CmdDetect, map[string][]string{"suv": {"log"}}) })
	require.PanicsWithValue(t, `cli: x sub reads "clickhouse.adr", which is no key of detect`,
		func() { SetupHelp(build(), config.CmdDetect, map[string][]string{"sub": {"clickhouse.adr"}}) })
}
