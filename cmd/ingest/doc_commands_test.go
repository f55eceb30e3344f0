package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/doccheck"
)

// TestDocCommands parses every ingest command that README.md and
// docs/*.md show with ingest's own command tree, without running it: the
// subcommand exists and runs, every flag exists and takes the value
// given, the arguments are what the subcommand accepts, and the
// configuration loads as ingest would load it (with the KEYHEAT_*
// variables the page exported before it, and no others).
func TestDocCommands(t *testing.T) {
	cmds, err := doccheck.Commands("../..")
	require.NoError(t, err)
	n := 0
	for _, c := range cmds {
		if c.Prog != "ingest" {
			continue
		}
		n++
		t.Run(c.String(), func(t *testing.T) {
			root := newRoot(nil)
			cmd, rest, err := root.Find(c.Args)
			require.NoError(t, err, "%s", c)
			require.NotSame(t, root, cmd, "%s: names no subcommand", c)
			require.True(t, cmd.Runnable(), "%s: %q does not run", c, cmd.CommandPath())
			require.NoError(t, cmd.ParseFlags(rest), "%s", c)
			require.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), "%s", c)
			// A config file the page named is one the reader made with
			// example-config (docs/configuration.md): load that.
			fs := cmd.Flags()
			example := filepath.Join(t.TempDir(), "keyheat.yaml")
			require.NoError(t, os.WriteFile(example, config.Example(), 0o644))
			env := []string{} // not nil: nil reads this process's environment
			for _, kv := range c.Env {
				if k, _, _ := strings.Cut(kv, "="); k == config.EnvPrefix+"_CONFIG" {
					kv = k + "=" + example
				}
				env = append(env, kv)
			}
			src := config.Source{Flags: fs, Environ: env}
			if f, _ := fs.GetString("config"); f != "" {
				src.File = example
			}
			_, err = config.Load(config.CmdIngest, src)
			require.NoError(t, err, "%s: ingest does not accept its configuration", c)
		})
	}
	require.GreaterOrEqual(t, n, 5, "README.md and docs/*.md show fewer ingest commands than they do today: is the extraction broken?")
}
