package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/composefile"
)

// TestComposeServices parses the command of every detect service of the
// repository's docker-compose.yml with detect's own command tree, and
// loads its configuration as that command does: with the shared file it
// mounts, its environment alone and its flags. deploy/compose_test.go
// checks the rest of the file.
func TestComposeServices(t *testing.T) {
	f, err := composefile.Load("../../docker-compose.yml", nil)
	require.NoError(t, err)
	n := 0
	for _, name := range f.Names() {
		s := f.Services[name]
		if len(s.Command) == 0 || filepath.Base(s.Command[0]) != "detect" {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			onlyEnv(t, s.Environment)
			root := newRoot(io.Discard)
			cmd, rest, err := root.Find(s.Command[1:])
			require.NoError(t, err, "service %s: command %q", name, s.Command)
			require.NotSame(t, root, cmd, "service %s: command %q names no subcommand", name, s.Command)
			require.True(t, cmd.Runnable(), "service %s: %q does not run", name, cmd.CommandPath())
			require.NoError(t, cmd.ParseFlags(rest), "service %s: command %q", name, s.Command)
			require.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), "service %s: command %q", name, s.Command)

			// --config names the file inside the container; load the
			// host file mounted there, as the container would see it.
			inContainer, _ := cmd.Flags().GetString("config")
			onHost, _, ok := f.HostPath(s, inContainer)
			require.True(t, ok, "service %s: --config=%q is not on a bind mount", name, inContainer)
			require.NoError(t, cmd.Flags().Set("config", onHost))
			_, _, err = load(cmd, nil)
			require.NoError(t, err, "service %s: detect does not accept its configuration", name)
		})
	}
	require.NotZero(t, n, "no service of docker-compose.yml runs detect")
}

// onlyEnv makes env the process's only KEYHEAT_ variables for the test,
// as in the service's container, restoring the others after.
func onlyEnv(t *testing.T, env map[string]string) {
	for _, kv := range os.Environ() {
		if name, val, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.EnvPrefix+"_") {
			require.NoError(t, os.Unsetenv(name))
			t.Cleanup(func() { os.Setenv(name, val) })
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}
