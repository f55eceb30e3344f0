package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/keyheat/keyheat/config"
)

// readsAnnotation is the cobra annotation under which Reads keeps the
// config keys a command reads, space separated.
const readsAnnotation = "keyheat.reads"

// HelpAllFlag is the flag that makes --help list every flag.
const HelpAllFlag = "help-all"

// Reads records that cmd reads the config keys given, each a key
// ("clickhouse.addr") or a whole section ("pipeline", "kafka.tls"): its
// --help lists the flags of those keys, grouped by section. Every config
// key stays a flag of every command, as Load accepts it; only the help
// leaves the others out.
func Reads(cmd *cobra.Command, keys ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[readsAnnotation] = strings.Join(keys, " ")
}

// SetupHelp gives root and every command below it a --help-all flag and
// a help that lists, besides a command's own flags, only the flags of the
// config keys of c it Reads, grouped by section, and says how many more
// there are and that --help-all lists them too. reads names, for root's
// commands by name, the keys each reads (as Reads). The flags of c's
// keys are root's persistent flags (config.AddFlags); call SetupHelp once
// the tree is built. It panics when reads names a command root does not
// have, or a command reads a key c does not have: typos the commands'
// tests catch.
func SetupHelp(root *cobra.Command, c config.Command, reads map[string][]string) {
	for name, keys := range reads {
		i := slices.IndexFunc(root.Commands(), func(cmd *cobra.Command) bool { return cmd.Name() == name })
		if i < 0 {
			panic(fmt.Sprintf("cli: %s has no command %q to read %v", root.CommandPath(), name, keys))
		}
		Reads(root.Commands()[i], keys...)
	}
	h := &helper{cmd: c}
	// cobra adds its help and completion commands when the tree runs;
	// added now, they get --help-all like every command the help lists.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, k := range h.reads(cmd) {
			if !c.Reads(k) {
				panic(fmt.Sprintf("cli: %s reads %q, which is no key of %s", cmd.CommandPath(), k, c))
			}
		}
		cmd.Flags().AddFlag(&pflag.Flag{Name: HelpAllFlag, Usage: "help that lists every flag, also the config keys this command does not read",
			Value: &helpAll{h: h, cmd: cmd, showsHelp: cmd.Name() != "help" || cmd.Parent() != root}, DefValue: "false", NoOptDefVal: "true"})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	root.SetUsageFunc(h.usage)
}

// helpAll is the value of --help-all: set, it also sets --help, so cobra
// shows the help before it looks at the arguments (query with none).
// The help command (`help run --help-all`) shows the help it is asked
// for instead of its own: there it only says to list every flag.
type helpAll struct {
	h         *helper
	cmd       *cobra.Command
	showsHelp bool
	on        bool
}

func (v *helpAll) String() string { return strconv.FormatBool(v.on) }
func (v *helpAll) Type() string   { return "bool" }

func (v *helpAll) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	v.on = on
	v.h.all = on
	if on && v.showsHelp {
		// cobra defines --help before it parses the flags.
		if f := v.cmd.Flags().Lookup("help"); f != nil {
			return f.Value.Set("true")
		}
	}
	return nil
}

type helper struct {
	cmd config.Command
	all bool // --help-all was given, to whichever command of the tree
}

func (h *helper) reads(cmd *cobra.Command) []string {
	return strings.Fields(cmd.Annotations[readsAnnotation])
}

// usage writes the usage part of cmd's help: what cobra's default
// template writes, except that config keys cmd does not read are counted,
// not listed, unless --help-all was given.
func (h *helper) usage(cmd *cobra.Command) error {
	w := cmd.OutOrStderr()
	all := h.all
	fmt.Fprintf(w, "Usage:\n")
	if cmd.Runnable() {
		fmt.Fprintf(w, "  %s\n", cmd.UseLine())
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "  %s [command]\n", cmd.CommandPath())
	}
	if cmd.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", cmd.Example)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nAvailable Commands:\n")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(w, "  %-*s %s\n", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}

	keys := h.cmd.Keys()
	isKey := map[string]bool{}
	for _, k := range keys {
		isKey[k] = true
	}
	own := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	var read, rest []*pflag.Flag
	patterns := h.reads(cmd)
	byName := map[string]*pflag.Flag{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		switch {
		case f.Hidden:
		case !isKey[f.Name]:
			own.AddFlag(f)
		default:
			byName[f.Name] = f
		}
	})
	for _, k := range keys { // declaration order: sections as the example file has them
		f := byName[k]
		switch {
		case f == nil:
		case readsKey(patterns, k):
			read = append(read, f)
		default:
			rest = append(rest, f)
		}
	}
	if own.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", own.FlagUsages())
	}
	if len(read) > 0 {
		ex := read[0].Name
		section, key, _ := strings.Cut(ex, ".")
		fmt.Fprintf(w, "\nSettings %s reads, by config section; each is also a key of the --config file and a variable (--%s: %s: {%s: …}, %s):\n",
			cmd.Name(), ex, section, key, config.EnvName(ex))
		writeSections(w, read)
	}
	switch {
	case !all || len(rest) == 0:
	case len(read) == 0 && cmd.HasAvailableSubCommands():
		fmt.Fprintf(w, "\nEvery config key, as a flag of every command (each command's --help lists those it reads):\n")
		writeSections(w, rest)
	default:
		fmt.Fprintf(w, "\nAccepted and checked, but not read by %s (keys of other commands: one config file serves them all, and a bad value in it stops every command):\n", cmd.CommandPath())
		writeSections(w, rest)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nUse \"%s [command] --help\" for more information about a command.\n", cmd.CommandPath())
	}
	switch {
	case all || len(rest) == 0:
	case len(read) == 0 && cmd.HasAvailableSubCommands():
		fmt.Fprintf(w, "Each command's --help lists, as flags, the config keys it reads; --help-all lists them all (%d).\n", len(rest))
	case len(read) == 0:
		fmt.Fprintf(w, "%d more flags, one per config key, are accepted too: --help-all lists them.\n", len(rest))
	case len(rest) == 1:
		fmt.Fprintf(w, "1 more flag, a config key %s does not read, is accepted too: --help-all lists it.\n", cmd.Name())
	default:
		fmt.Fprintf(w, "%d more flags, config keys %s does not read, are accepted too: --help-all lists them.\n", len(rest), cmd.Name())
	}
	return nil
}

// readsKey reports whether key is one of patterns or in a section of
// them.
func readsKey(patterns []string, key string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return key == p || strings.HasPrefix(key, p+".") })
}

// writeSections writes flags, config keys in declaration order, under a
// heading per top-level section.
func writeSections(w io.Writer, flags []*pflag.Flag) {
	for len(flags) > 0 {
		section, _, _ := strings.Cut(flags[0].Name, ".")
		fs := pflag.NewFlagSet(section, pflag.ContinueOnError)
		fs.SortFlags = false
		i := 0
		for ; i < len(flags); i++ {
			if s, _, _ := strings.Cut(flags[i].Name, "."); s != section {
				break
			}
			fs.AddFlag(flags[i])
		}
		fmt.Fprintf(w, "  %s:\n%s", section, fs.FlagUsages())
		flags = flags[i:]
	}
}
