package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
)

// TestHelpAllOnEveryCommand: every command a root's help lists takes
// --help-all, as the help says (cobra's own help and completion
// commands too), and shows every key with it; `help CMD --help-all` is
// CMD's --help-all.
func TestHelpAllOnEveryCommand(t *testing.T) {
	build := func() (*cobra.Command, *bytes.Buffer) {
		root := &cobra.Command{Use: "detect", SilenceUsage: true, SilenceErrors: true}
		config.AddFlags(root.PersistentFlags(), config.CmdDetect)
		sub := &cobra.Command{Use: "run", Short: "run it", RunE: func(*cobra.Command, []string) error { return nil }}
		root.AddCommand(sub)
		Reads(sub, "log")
		SetupHelp(root, config.CmdDetect, nil)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		return root, &out
	}
	for _, args := range [][]string{
		{"--help-all"},
		{"run", "--help-all"},
		{"completion", "--help-all"},
		{"completion", "bash", "--help-all"},
		{"help", "--help-all"},
		{"help", "run", "--help-all"},
	} {
		root, out := build()
		root.SetArgs(args)
		require.NoError(t, root.ExecuteContext(context.Background()), "detect %v", args)
		require.Contains(t, out.String(), "--pipeline.window ", "detect %v lists every key:\n%s", args, out.String())
		require.NotContains(t, out.String(), "--help-all lists", "detect %v", args)
	}
}
