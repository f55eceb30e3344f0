package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/doccheck"
)

// TestDocCommands parses every detect command that README.md and
// docs/*.md show with detect's own command tree, without running it: the
// subcommand exists and runs, every flag exists and takes the value
// given, the arguments are what the subcommand accepts, and the
// configuration loads as detect would load it (with the KEYHEAT_*
// variables the page exported before it, and no others).
func TestDocCommands(t *testing.T) {
	cmds, err := doccheck.Commands("../..")
	require.NoError(t, err)
	n := 0
	for _, c := range cmds {
		if c.Prog != "detect" {
			continue
		}
		n++
		t.Run(c.String(), func(t *testing.T) {
			// A config file the page named is one the reader made with
			// example-config (docs/configuration.md): load that.
			example := filepath.Join(t.TempDir(), "keyheat.yaml")
			require.NoError(t, os.WriteFile(example, config.Example(), 0o644))
			env := map[string]string{}
			for _, kv := range c.Env {
				k, v, _ := strings.Cut(kv, "=")
				if k == config.EnvPrefix+"_CONFIG" {
					v = example
				}
				env[k] = v
			}
			onlyEnv(t, env)
			root := newRoot(io.Discard)
			cmd, rest, err := root.Find(c.Args)
			require.NoError(t, err, "%s", c)
			require.NotSame(t, root, cmd, "%s: names no subcommand", c)
			require.True(t, cmd.Runnable(), "%s: %q does not run", c, cmd.CommandPath())
			require.NoError(t, cmd.ParseFlags(rest), "%s", c)
			require.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), "%s", c)
			if f, _ := cmd.Flags().GetString("config"); f != "" {
				require.NoError(t, cmd.Flags().Set("config", example))
			}
			_, _, err = load(cmd, nil)
			require.NoError(t, err, "%s: detect does not accept its configuration", c)
		})
	}
	require.GreaterOrEqual(t, n, 10, "README.md and docs/*.md show fewer detect commands than they do today: is the extraction broken?")
}
