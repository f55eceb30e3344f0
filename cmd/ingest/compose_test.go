package main

import (
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/composefile"
)

// TestComposeServices parses the command of every ingest service of the
// repository's docker-compose.yml with ingest's own command tree, and
// loads its configuration as that command does: with the shared file it
// mounts, its environment alone and its flags. A gen service's traffic
// settings are checked as gen checks them. deploy/compose_test.go checks
// the rest of the file.
func TestComposeServices(t *testing.T) {
	f, err := composefile.Load("../../docker-compose.yml", nil)
	require.NoError(t, err)
	n := 0
	for _, name := range f.Names() {
		s := f.Services[name]
		if len(s.Command) == 0 || filepath.Base(s.Command[0]) != "ingest" {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			root := newRoot(nil)
			cmd, rest, err := root.Find(s.Command[1:])
			require.NoError(t, err, "service %s: command %q", name, s.Command)
			require.NotSame(t, root, cmd, "service %s: command %q names no subcommand", name, s.Command)
			require.True(t, cmd.Runnable(), "service %s: %q does not run", name, cmd.CommandPath())
			require.NoError(t, cmd.ParseFlags(rest), "service %s: command %q", name, s.Command)
			require.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), "service %s: command %q", name, s.Command)

			// --config names the file inside the container; load the
			// host file mounted there, as run does.
			fs := cmd.Flags()
			inContainer, _ := fs.GetString("config")
			onHost, _, ok := f.HostPath(s, inContainer)
			require.True(t, ok, "service %s: --config=%q is not on a bind mount", name, inContainer)
			env := []string{} // not nil: nil reads this process's environment
			for k, v := range s.Environment {
				env = append(env, k+"="+v)
			}
			cfg, err := config.Load(config.CmdIngest, config.Source{File: onHost, Flags: fs, Environ: env})
			require.NoError(t, err, "service %s: ingest does not accept its configuration", name)

			if cmd.Name() == "gen" {
				checkGen(t, name, fs, cfg)
			}
		})
	}
	require.NotZero(t, n, "no service of docker-compose.yml runs ingest")
}

// checkGen builds gen's settings from its flags as gen's RunE does and
// validates them as gen does (a duration or a count, planted shares, …).
func checkGen(t *testing.T, service string, fs *pflag.FlagSet, cfg *config.Config) {
	t.Helper()
	var gc ingest.GenConfig
	var err error
	gc.Keys, err = fs.GetInt("keys")
	require.NoError(t, err)
	gc.S, _ = fs.GetFloat64("zipf")
	gc.Rate, _ = fs.GetFloat64("rate")
	gc.Duration, _ = fs.GetDuration("duration")
	gc.Count, _ = fs.GetInt64("count")
	gc.Seed, _ = fs.GetUint64("seed")
	gc.App = cfg.Ingest.Parse.App
	hots, err := fs.GetStringArray("hot")
	require.NoError(t, err)
	for _, h := range hots {
		hk, err := ingest.ParseHotKey(h)
		require.NoError(t, err, "service %s: --hot=%s", service, h)
		gc.Hot = append(gc.Hot, hk)
	}
	_, err = ingest.NewGen(gc, nil, nil)
	require.NoError(t, err, "service %s: gen refuses its flags", service)
}
